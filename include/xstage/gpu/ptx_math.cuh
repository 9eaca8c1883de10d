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
