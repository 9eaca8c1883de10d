// In-kernel clocks. %globaltimer is the GPU-wide nanosecond clock (comparable across SMs, coarse:
// it advances in steps of up to ~1 µs on some parts); clock64 counts this SM's cycles (fine, but
// per SM and frequency-dependent). Per-burst spans use %globaltimer; cycle counts only within one SM.
#pragma once

#include <cstdint>

namespace xstage::gpu {

__device__ __forceinline__ std::uint64_t globaltimer_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
  return t;
}

__device__ __forceinline__ std::uint64_t sm_cycles() {
  std::uint64_t c;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(c)::"memory");
  return c;
}

__device__ __forceinline__ std::uint32_t smid() {
  std::uint32_t id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

// Spins this thread for at least `ns` nanoseconds of %globaltimer time.
__device__ __forceinline__ void spin_for_ns(std::uint64_t ns) {
  const std::uint64_t start = globaltimer_ns();
  while (globaltimer_ns() - start < ns) {
  }
}

}  // namespace xstage::gpu
