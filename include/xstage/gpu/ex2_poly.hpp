// 2^x on the FMA and integer pipes, no MUFU, for kernels whose exponentials saturate MUFU.EX2 (16 per SM
// per cycle): the FP8 attention softmax takes some of its exponentials here (attn_softmax.cuh). Pure:
// the kernel and the CPU test (tests/cpu/test_ex2_poly.cpp) run the same function.
//
// x = n + f, n = round(x) by the 1.5 * 2^23 trick (t = x + 1.5 * 2^23 holds n in its low mantissa bits),
// f in [-0.5, 0.5]; 2^f by a cubic with p(0) = 1 (a weighted least-squares fit of the relative error on
// [-0.5, 0.5]: below 1.2e-4, float rounding included); n added to the exponent bits of p. Invariants: x is
// clamped to -125 first, so the exponent never leaves the normal range (results below 2^-125 come out as
// about 2^-125 instead of 0: callers whose values matter at 1e-37 must not use it); an integer x gives
// 2^x exactly; x must be at most 127 (no overflow check). Not bit-equal to MUFU.EX2's 2^x.
#pragma once

#include <cmath>
#include <cstdint>

#include "xstage/gpu/float_bits.hpp"
#include "xstage/gpu/host_device.hpp"

namespace xstage::gpu {

XSTAGE_HOST_DEVICE_INLINE float ex2_poly3(float x) {
  constexpr float kRound = 12582912.f;  // 1.5 * 2^23
  x = fmaxf(x, -125.f);
  const float t = x + kRound;
  const float f = x - (t - kRound);
  const float p = fmaf(fmaf(fmaf(0.05459283f, f, 0.24221838f), f, 0.69336869f), f, 1.f);
  return float_of_bits(float_bits(p) + (float_bits(t) << 23));
}

}  // namespace xstage::gpu
