// A producer-side gap made of Tensor Core work: every warp of the CTA issues bf16 mma.sync
// (m16n8k16, fp32 accumulate) on register operands until the SM clock says the gap is over. The gap
// is real matrix work with no memory traffic, so a gap sweep with it shows that a gap filled with
// compute lets the X-Stage drain just as idling does.
#pragma once

#include <cstdint>

#include "xstage/gpu/ptx_math.cuh"
#include "xstage/gpu/timer.cuh"

namespace xstage::gpu {

// Runs MMAs in chunks of 4 independent accumulators × `kChunk` until clock64() − start_cycles ≥
// gap_cycles. Returns the number of MMA instructions this warp lane's warp issued (counted once per
// warp by lane 0 at the caller); `sink` receives a value that depends on every MMA so none is dead.
template <int kChunk = 4>
__device__ __forceinline__ std::uint32_t mma_until(std::uint64_t start_cycles, std::uint64_t gap_cycles,
                                                   std::uint32_t seed, float& sink) {
  // bf16 pairs near 1.0 with seed-dependent low bits: finite, non-trivial operands.
  std::uint32_t a[4], b[2];
  const std::uint32_t lane = threadIdx.x & 31u;
  for (int i = 0; i < 4; ++i) a[i] = 0x3f803f80u ^ ((seed + lane + 7u * i) & 0x007f007fu);
  for (int i = 0; i < 2; ++i) b[i] = 0x3f003f00u ^ ((seed * 3u + lane + 5u * i) & 0x007f007fu);
  float acc[4][4] = {};
  std::uint32_t issued = 0;
  while (sm_cycles() - start_cycles < gap_cycles) {
#pragma unroll
    for (int c = 0; c < kChunk; ++c) {
#pragma unroll
      for (int j = 0; j < 4; ++j) mma_bf16_m16n8k16(acc[j], a, b);
    }
    issued += 4 * kChunk;
  }
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int k = 0; k < 4; ++k) s += acc[j][k];
  sink += s;
  return issued;
}

}  // namespace xstage::gpu
