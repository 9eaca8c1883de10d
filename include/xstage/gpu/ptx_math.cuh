// Inline PTX for arithmetic that CUDA C++ reaches only with extra instructions: the approximate
// special-function unit operations without their range fix-ups, and the warp-level bf16 MMA.
#pragma once

#include <cstdint>

namespace xstage::gpu {

// 2^x (ex2.approx.ftz: one MUFU.EX2; denormal inputs and results flushed to zero). Not volatile: pure,
// so the compiler may schedule, share or drop it like arithmetic.
__device__ __forceinline__ float ex2_approx_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// 2^x on the FMA and integer pipes, no MUFU (for kernels whose exponentials saturate MUFU): x = n + f,
// n = round(x) (the 1.5 * 2^23 rounding trick: t = x + 1.5 * 2^23 holds n in its low mantissa bits), f in
// [-0.5, 0.5]; 2^f by a cubic with p(0) = 1 (relative error below 1.2e-4 on [-0.5, 0.5]); n added to the
// exponent bits. x is clamped to -125 first, so the exponent never leaves the normal range (results
// below 2^-125 come out as about 2^-125 instead of 0: callers whose values matter at 1e-37 must not use it).
__device__ __forceinline__ float ex2_poly3(float x) {
  constexpr float kRound = 12582912.f;  // 1.5 * 2^23
  x = fmaxf(x, -125.f);
  const float t = x + kRound;
  const float f = x - (t - kRound);
  const float p = __fmaf_rn(__fmaf_rn(__fmaf_rn(0.05459283f, f, 0.24221838f), f, 0.69336869f), f, 1.f);
  return __int_as_float(__float_as_int(p) + (__float_as_int(t) << 23));
}

// 1/x (rcp.approx.ftz: one MUFU.RCP, relative error ~1e-7, no Newton step). Pure, as ex2_approx_ftz.
__device__ __forceinline__ float rcp_approx_ftz(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// d += a · b for one warp: bf16 m16n8k16, fp32 accumulate, register operands (mma.sync). volatile:
// the gap kernel's MMAs are the measured work and must all issue, even where their results are summed
// only once at the end.
__device__ __forceinline__ void mma_bf16_m16n8k16(float (&d)[4], const std::uint32_t (&a)[4],
                                                  const std::uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

}  // namespace xstage::gpu
