// System-scope release/acquire flags, bounded waits and proxy fences (what CuTe lacks).
//
// Ordering contract (DEVICE.md): producer payload stores → CTA barrier → one thread
// publish_flag_release (st.release.sys); consumer wait_flag_* (ld.acquire.sys) → CTA barrier →
// ordinary loads. Peer-written data is never read through the non-coherent path.
#pragma once

#include <cstdint>
#include <cstdio>

#include "xstage/gpu/timer.cuh"

namespace xstage::gpu {

// st.release.sys: every store this thread made (and, after a CTA barrier, every store of the CTA that
// the barrier ordered before it) is visible system-wide before the flag value is.
__device__ __forceinline__ void publish_flag_release(std::uint32_t* flag, std::uint32_t value) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(flag), "r"(value) : "memory");
}

__device__ __forceinline__ std::uint32_t load_flag_acquire(const std::uint32_t* flag) {
  std::uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(flag) : "memory");
  return v;
}

// Relaxed system-scope load: polling without ordering (follow a successful poll with an acquire).
__device__ __forceinline__ std::uint32_t load_flag_relaxed(const std::uint32_t* flag) {
  std::uint32_t v;
  asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(flag) : "memory");
  return v;
}

// Device-scope arrival counter for grid barriers within one GPU (red.release.gpu).
__device__ __forceinline__ void arrive_counter_release_gpu(std::uint32_t* counter, std::uint32_t inc) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(counter), "r"(inc) : "memory");
}

__device__ __forceinline__ std::uint32_t load_counter_acquire_gpu(const std::uint32_t* counter) {
  std::uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(counter) : "memory");
  return v;
}

// Generic-proxy writes to shared memory made visible to the async proxy (TMA, wgmma operand reads).
__device__ __forceinline__ void fence_proxy_async_shared_cta() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Generic-proxy global writes (plain or peer stores) ordered before later async-proxy (TMA) reads of
// them; on the writer side, async-proxy bulk writes ordered before a generic-proxy flag release.
__device__ __forceinline__ void fence_proxy_async_global() { asm volatile("fence.proxy.async.global;" ::: "memory"); }

// Waits until this thread's earlier stores are performed system-wide (they have left the X-Stage).
__device__ __forceinline__ void fence_acq_rel_sys() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }

// What a bounded wait was waiting for, printed when it times out.
struct WaitSite {
  const char* what;   // e.g. "probe: grid barrier", "flag test: payload flag"
  int rank;           // team rank of the waiter (-1 when not in a team)
  int peer;           // whose write was awaited (-1 when unknown / many)
};

// Spins with ld.acquire.sys until *flag >= target (wrap-free counters) or timeout_ns passes.
// Returns true on success. On timeout prints who waited for what and returns false; the caller
// decides whether to trap (wait_flag_geq_or_trap) or to report (tests of the timeout path).
__device__ __forceinline__ bool wait_flag_geq(const std::uint32_t* flag, std::uint32_t target,
                                              std::uint64_t timeout_ns, WaitSite site) {
  const std::uint64_t t0 = globaltimer_ns();
  std::uint32_t seen = load_flag_acquire(flag);
  while (seen < target) {
    if (globaltimer_ns() - t0 > timeout_ns) {
      printf("xstage: bounded wait timed out after %llu ns: rank %d block %d thread %d waited for %s "
             "(flag %p >= %u, last seen %u, from peer %d)\n",
             static_cast<unsigned long long>(globaltimer_ns() - t0), site.rank, static_cast<int>(blockIdx.x),
             static_cast<int>(threadIdx.x), site.what, static_cast<const void*>(flag), target, seen, site.peer);
      return false;
    }
    __nanosleep(32);
    seen = load_flag_acquire(flag);
  }
  return true;
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
    const std::uint64_t t0 = globaltimer_ns();
    std::uint32_t seen = load_counter_acquire_gpu(counter);
    while (seen < target) {
      if (globaltimer_ns() - t0 > timeout_ns) {
        printf("xstage: bounded wait timed out: rank %d block %d waited for %s (round %u: %u of %u CTAs arrived)\n",
               site.rank, static_cast<int>(blockIdx.x), site.what, round, seen - expected_blocks * round,
               expected_blocks);
        __trap();
      }
      seen = load_counter_acquire_gpu(counter);
    }
  }
  __syncthreads();
}

}  // namespace xstage::gpu
