// The key order of the FP8 attention's V^T (host and device: the quantization pre-pass writes it, the CPU
// tests check it against the GMMA fragment layouts).
//
// The FP8 P V GEMM takes P from registers as its A operand. The S accumulator gives thread t (of a quad)
// columns 8c + 2t + {0,1} of each 32-key group (c = 0..3), while an e4m3 A fragment holds k indices
// 4t + {0..3} and 16 + 4t + {0..3}: the same eight keys per thread, in another order. Rather than shuffle
// P between threads, the kernel feeds the registers as they are (acc_to_fp8_operand_a), and V^T's keys
// are stored in the order those registers present them: slot s of a group holds key fp8_key_of_slot(s).
#pragma once

#include "xstage/gpu/host_device.hpp"

namespace xstage::attn {

inline constexpr int kFp8KeyGroup = 32;  // the P V GEMM's k extent per instruction; V^T is permuted within it

// A-operand value (j in 0..3, half in 0..1) of quad thread t sits at slot 16 half + 4 t + j and is the
// accumulator's column pair j % 2 of 8-column chunk 2 half + j / 2, i.e. key 16 half + 8 (j / 2) + 2 t + j % 2.
XSTAGE_HOST_DEVICE constexpr int fp8_key_of_slot(int slot) {
  const int half = slot / 16, t = (slot % 16) / 4, j = slot % 4;
  return 16 * half + 8 * (j / 2) + 2 * t + (j % 2);
}

}  // namespace xstage::attn
