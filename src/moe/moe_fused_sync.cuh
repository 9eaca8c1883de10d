// Bounded waits of the fused MoE kernel and their failure record. 64-bit arrival counters are monotonic
// across runs (no reset, so no race between one rank's reset and a peer's next-run increments); each run
// waits for base + this run's rows. An expired wait writes what it waited for to host-mapped memory
// and traps (no printf: a call inside the GMMA kernel serializes its wgmma instructions). The PTX of
// the counters, flags, loads and barriers they poll is in include/xstage/gpu/ptx_*.cuh.
#pragma once

#include <cstdint>

#include "moe_fused_kernel.hpp"
#include "xstage/gpu/bounded_wait.cuh"
#include "xstage/gpu/ptx_mbarrier.cuh"
#include "xstage/gpu/ptx_memory.cuh"

namespace xstage::moe {

// The recorder of the fused kernel's bounded waits: the first wait of a launch to time out writes who
// waited for what into the host-mapped record (read by the host once the kernel has failed), then the
// kernel traps here. [[noreturn]], so the compiler drops everything after a failed wait (the trap that
// gpu::bounded_wait would execute after a returning recorder included).
[[noreturn]] __device__ __forceinline__ void moe_fail_wait(MoeFusedWaitFailure* failure, std::uint32_t code,
                                                             std::uint32_t rank, std::uint32_t index,
                                                             std::uint64_t target, std::uint64_t seen) {
  volatile MoeFusedWaitFailure* vf = failure;
  if (vf != nullptr && vf->code == 0) {
    vf->rank = rank;
    vf->block = blockIdx.x;
    vf->thread = threadIdx.x;
    vf->index = index;
    vf->target = target;
    vf->seen = seen;
    __threadfence_system();
    vf->code = code;
    __threadfence_system();
  }
  __trap();
}

// Bounded spin until load() >= target (gpu::bounded_wait, 64 ns back-off; the caller follows it with
// whatever fence its readers need). Past timeout_ns: moe_fail_wait(code, index, target, last value seen).
template <class Load>
__device__ __forceinline__ void moe_wait_geq(Load load, std::uint64_t target, std::uint64_t timeout_ns,
                                             MoeFusedWaitFailure* failure, std::uint32_t code, std::uint32_t rank,
                                             std::uint32_t index) {
  gpu::bounded_wait<64>(
      load, [target](std::uint64_t seen) { return seen >= target; }, timeout_ns,
      [=](std::uint64_t seen, std::uint64_t) { moe_fail_wait(failure, code, rank, index, target, seen); });
}

}  // namespace xstage::moe
