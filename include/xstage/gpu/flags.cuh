// System-scope release/acquire flags and the waits on them: the flag protocol of
// docs/memory_ordering.md ("Publishing", "Consuming"): producer payload stores → CTA barrier → one
// thread publish_flag_release (st.release.sys); consumer wait_flag_* (ld.acquire.sys) → CTA barrier →
// ordinary loads. Peer-written data is never read through the non-coherent path. The PTX wrappers
// (flags, counters, fences) live in ptx_memory.cuh, included here for the kernels that use both.
#pragma once

#include <cstdint>
#include <cstdio>

#include "xstage/gpu/bounded_wait.cuh"
#include "xstage/gpu/ptx_memory.cuh"
#include "xstage/gpu/timer.cuh"

namespace xstage::gpu {

// What a bounded wait was waiting for, printed when it times out.
struct WaitSite {
  const char* what;   // e.g. "probe: grid barrier", "flag test: payload flag"
  int rank;           // team rank of the waiter (-1 when not in a team)
  int peer;           // whose write was awaited (-1 when unknown / many)
};

// Spins with ld.acquire.sys until *flag >= target (wrap-free counters) or timeout_ns passes
// (bounded_wait, 32 ns back-off). Returns true on success. On timeout prints who waited for what and
// returns false; the caller decides whether to trap (wait_flag_geq_or_trap) or to report (tests of the
// timeout path).
__device__ __forceinline__ bool wait_flag_geq(const std::uint32_t* flag, std::uint32_t target,
                                              std::uint64_t timeout_ns, WaitSite site) {
  const std::uint32_t seen = bounded_wait<32, WaitTimeout::kGiveUp>(
      [&] { return load_flag_acquire(flag); }, [&](std::uint32_t v) { return v >= target; }, timeout_ns,
      [&](std::uint32_t v, std::uint64_t waited_ns) {
        printf("xstage: bounded wait timed out after %llu ns: rank %d block %d thread %d waited for %s "
               "(flag %p >= %u, last seen %u, from peer %d)\n",
               static_cast<unsigned long long>(waited_ns), site.rank, static_cast<int>(blockIdx.x),
               static_cast<int>(threadIdx.x), site.what, static_cast<const void*>(flag), target, v, site.peer);
      });
  return seen >= target;
}

// The form kernels use: a wait that cannot hang. Trapping aborts the kernel with an error the host
// sees at its next synchronising call (checked), after the printf above has named the wait.
__device__ __forceinline__ void wait_flag_geq_or_trap(const std::uint32_t* flag, std::uint32_t target,
                                                      std::uint64_t timeout_ns, WaitSite site) {
  if (!wait_flag_geq(flag, target, timeout_ns, site)) __trap();
}

// Grid-wide barrier among `expected_blocks` co-resident CTAs of one kernel on one GPU, on a
// monotonically increasing counter (round r waits for expected_blocks·(r+1) arrivals; the counter
// must start at 0 for the launch). Bounded: traps with a diagnostic if a CTA never arrives (e.g.
// the grid was larger than what is resident).
__device__ __forceinline__ void grid_barrier(std::uint32_t* counter, std::uint32_t expected_blocks, std::uint32_t round,
                                             std::uint64_t timeout_ns, WaitSite site) {
  __syncthreads();
  if (threadIdx.x == 0) {
    arrive_counter_release_gpu(counter, 1);
    const std::uint32_t target = expected_blocks * (round + 1);
    bounded_wait<0>(
        [&] { return load_counter_acquire_gpu(counter); }, [&](std::uint32_t v) { return v >= target; }, timeout_ns,
        [&](std::uint32_t v, std::uint64_t) {
          printf("xstage: bounded wait timed out: rank %d block %d waited for %s (round %u: %u of %u CTAs arrived)\n",
                 site.rank, static_cast<int>(blockIdx.x), site.what, round, v - expected_blocks * round,
                 expected_blocks);
        });
  }
  __syncthreads();
}

}  // namespace xstage::gpu
