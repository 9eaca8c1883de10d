// Inline PTX for shared-memory barriers (mbarrier) and the cluster barrier, where CUTLASS's wrappers
// lack the semantics or the clobbers a protocol needs.
#pragma once

#include <cstdint>

namespace xstage::gpu {

// 1 once the phase of parity `parity` of this CTA's barrier has completed (acquire at cluster scope).
// mbarrier.try_wait may suspend the thread for a while before it answers; with kNeverSuspend,
// mbarrier.test_wait answers at once (for a warp that has other work between its tests).
template <bool kNeverSuspend = false>
__device__ __forceinline__ std::uint32_t mbar_try_wait_parity_acquire_cluster(const std::uint64_t* bar,
                                                                              std::uint32_t parity) {
  std::uint32_t done;
  if constexpr (kNeverSuspend) {
    asm volatile("{\n .reg .pred p;\n mbarrier.test_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
                 " selp.u32 %0, 1, 0, p;\n}"
                 : "=r"(done)
                 : "r"(std::uint32_t(__cvta_generic_to_shared(bar))), "r"(parity)
                 : "memory");
  } else {
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
                 " selp.u32 %0, 1, 0, p;\n}"
                 : "=r"(done)
                 : "r"(std::uint32_t(__cvta_generic_to_shared(bar))), "r"(parity)
                 : "memory");
  }
  return done;
}

// One arrival on this CTA's barrier (release at CTA scope). Not cutlass::arch::ClusterBarrier::arrive:
// that asm has no memory clobber, and the stores this arrival publishes must not be moved below it.
__device__ __forceinline__ void mbar_arrive_cta(const std::uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(std::uint32_t(__cvta_generic_to_shared(bar)))
               : "memory");
}

// All threads of every CTA of the cluster (barrier.cluster, not .aligned: callers may be divergent).
__device__ __forceinline__ void cluster_sync_all_threads() {
  asm volatile("barrier.cluster.arrive;\n" ::: "memory");
  asm volatile("barrier.cluster.wait;\n" ::: "memory");
}

}  // namespace xstage::gpu
