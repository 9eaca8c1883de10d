// The FP8 attention path's quantization pre-pass and its workspace: one definition of the layout the
// pre-pass writes and the FP8 kernel reads (xstage/attn/forward.hpp states the scheme for users).
//
//   Q8  [B, Sq, H, D] e4m3, contiguous     q / q_scale[b, h, query block of kQBlock rows]
//   K8  [B, Sk, H, D] e4m3, contiguous     (k - k_mean[b, h, :]) / k_scale[b, h, key block of kKBlock rows]
//   Vt8 [B, H, D, Sk_pad] e4m3             v^T / v_scale[b, h, d], keys permuted within groups of 32 (below)
//   q_scale, k_scale, v_scale, k_mean      fp32
//   k_sum, v_max partials                  fp32 [B*H, chunks, D]: the sequence statistics, reduced in a
//                                          fixed order (bit-reproducible; no float atomics)
//
// Why these choices (docs/attn_fp8.md): a scale per block of queries and keys follows the rows' own
// range (a DiT row with outlier channels does not flatten its neighbours); subtracting K's mean over the
// sequence removes the large shared component that would otherwise take e4m3's range (softmax is
// unchanged by it: q . mean is the same for every key of a row); V per channel, because the output's
// channel c is a weighted mean of V's channel c alone, so its scale factors out of P V exactly.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "xstage/attn/forward.hpp"
#include "xstage/gpu/host_device.hpp"
#include "xstage/sched/attn_tile_config.hpp"

namespace xstage::attn {

inline constexpr int kFp8HeadDim = 128;  // the one head dimension the FP8 kernel is built for
inline constexpr int kFp8QBlock = 64;     // query rows per Q scale: one consumer warpgroup's rows
// Keys per K scale: the FP8 kernel's block_n (tuning builds: -DXSTAGE_ATTN_FP8_TUNE_BLOCK_N=192).
#if defined(XSTAGE_ATTN_FP8_TUNE_BLOCK_N)
inline constexpr int kFp8KBlock = XSTAGE_ATTN_FP8_TUNE_BLOCK_N;
#else
inline constexpr int kFp8KBlock = sched::attn_fp8_tile_config(kFp8HeadDim).block_n;
#endif
static_assert(kFp8KBlock % 32 == 0 && kFp8KBlock <= 256, "block_n: a multiple of the P V k step, one TMA box");
inline constexpr int kFp8KeyGroup = 32;   // the P V GEMM's k extent per instruction; V^T is permuted within it
inline constexpr int kFp8StatRows = 256;  // sequence rows per partial of the K-sum / V-max statistics
inline constexpr float kFp8Max = 448.f;   // largest finite e4m3

// The FP8 P V GEMM takes P from registers as its A operand. The S accumulator gives thread t (of a quad)
// columns 8c + 2t + {0,1} of each 32-key group (c = 0..3), while an e4m3 A fragment holds k indices
// 4t + {0..3} and 16 + 4t + {0..3}: the same eight keys per thread, in another order. Rather than shuffle
// P between threads, the kernel feeds the registers as they are, and V^T's keys are stored in the order
// those registers present them: slot s of a group holds key fp8_key_of_slot(s). This is that order.
XSTAGE_HOST_DEVICE constexpr int fp8_key_of_slot(int slot) {
  const int half = slot / 16, t = (slot % 16) / 4, j = slot % 4;
  return 16 * half + 8 * (j / 2) + 2 * t + (j % 2);
}

struct Fp8Workspace {
  // Byte offsets into the workspace (each 256-byte aligned) and the counts that size them.
  size_t q8 = 0, k8 = 0, vt8 = 0, q_scale = 0, k_scale = 0, v_scale = 0, k_mean = 0, k_sum = 0, v_max = 0;
  size_t bytes = 0;
  int q_blocks = 0;   // per (b, h): ceil(Sq / kFp8QBlock)
  int k_blocks = 0;   // per (b, h): ceil(Sk / kFp8KBlock)
  int seq_k_pad = 0;  // Vt8's key extent: k_blocks * kFp8KBlock
  int stat_chunks = 0;
};

Fp8Workspace fp8_workspace_layout(const AttnForwardProblem& p);

// Device pointers into a workspace of at least layout.bytes bytes.
struct Fp8Operands {
  const void* q8;
  const void* k8;
  const void* vt8;
  const float* q_scale;
  const float* k_scale;
  const float* v_scale;
};
Fp8Operands fp8_operands(const Fp8Workspace& w, void* workspace);

// Quantizes args' q, k, v into args.workspace (five launches on `stream`). The caller has checked args
// (attn_forward_can_implement).
cudaError_t fp8_quantize(const AttnForwardArgs& args, const Fp8Workspace& w, cudaStream_t stream);

// The FP8 forward with the local epilogue (attn_fp8_forward.cu): fp8_quantize, then the FP8 kernel.
cudaError_t attn_forward_fp8_local(const AttnForwardArgs& args, cudaStream_t stream);

}  // namespace xstage::attn
