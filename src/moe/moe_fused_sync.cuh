// Counters and bounded waits of the fused MoE kernel. 64-bit arrival counters are monotonic across
// runs (no reset, so no race between one rank's reset and a peer's next-run increments); each run
// waits for base + this run's rows. An expired wait writes what it waited for to host-mapped memory
// and traps (no printf: a call inside the GMMA kernel serializes its wgmma instructions).
#pragma once

#include <cstdint>

#include "moe_fused_kernel.hpp"
#include "xstage/gpu/flags.cuh"  // the 32-bit flags, counters and proxy fences used beside these

namespace xstage::moe {

__device__ __forceinline__ void red_release_sys_add_u64(std::uint64_t* p, std::uint64_t v) {
  asm volatile("red.release.sys.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ std::uint64_t ld_acquire_sys_u64(const std::uint64_t* p) {
  std::uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ int ld_relaxed_sys_s32(const int* p) {
  int v;
  asm volatile("ld.relaxed.sys.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Weak, L1-cached loads of data written during the kernel by other threads, CTAs or GPUs, for readers
// ordered after those writes by a chain that ends in an acquire at gpu or sys scope made on this SM (e.g.
// the producer's acquire of a tile's inputs, then the stage's full barrier): in the PTX memory model the
// chain makes the writes visible to the weak load, and the acquire drops the SM's L1 lines, so later hits
// are current. Rows and their scales are read again k-step after k-step, which an L2 round trip per load
// (ld.global.cg) made the FP8 mainloop wait on. volatile: never moved above the wait that orders it.
__device__ __forceinline__ float ld_after_acquire_f32(const float* p) {
  float v;
  asm volatile("ld.global.ca.f32 %0, [%1];" : "=f"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ int ld_after_acquire_s32(const int* p) {
  int v;
  asm volatile("ld.global.ca.s32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}

// A bounded wait that timed out: the first such wait of a launch writes who waited for what into the
// host-mapped record (read by the host once the kernel has failed), then the kernel traps.
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

// Bounded spin until load() >= target (the caller follows it with whatever fence its readers need).
template <class Load>
__device__ __forceinline__ void moe_wait_geq(Load load, std::uint64_t target, std::uint64_t timeout_ns,
                                             MoeFusedWaitFailure* failure, std::uint32_t code, std::uint32_t rank,
                                             std::uint32_t index) {
  std::uint64_t seen = load();
  if (seen >= target) return;
  const std::uint64_t t0 = gpu::globaltimer_ns();
  while (seen < target) {
    if (gpu::globaltimer_ns() - t0 > timeout_ns) moe_fail_wait(failure, code, rank, index, target, seen);
    __nanosleep(64);
    seen = load();
  }
}

// 1 once the phase of parity `parity` of this CTA's barrier has completed (acquire at cluster scope).
// mbarrier.try_wait may suspend the thread for a while before it answers; with kNeverSuspend,
// mbarrier.test_wait answers at once (for a warp that has other work between its tests).
#define XSTAGE_MOE_MBAR_POLL(op)                                                                           \
  asm volatile("{\n .reg .pred p;\n mbarrier." op ".parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n" \
               " selp.u32 %0, 1, 0, p;\n}"                                                                 \
               : "=r"(done)                                                                                \
               : "r"(std::uint32_t(__cvta_generic_to_shared(bar))), "r"(parity)                            \
               : "memory")
template <bool kNeverSuspend = false>
__device__ __forceinline__ std::uint32_t moe_mbar_try_wait_acquire_cluster(const std::uint64_t* bar, std::uint32_t parity) {
  std::uint32_t done;
  if constexpr (kNeverSuspend) {
    XSTAGE_MOE_MBAR_POLL("test_wait");
  } else {
    XSTAGE_MOE_MBAR_POLL("try_wait");
  }
  return done;
}
#undef XSTAGE_MOE_MBAR_POLL

// One arrival on this CTA's barrier (release at CTA scope). Not cutlass::arch::ClusterBarrier::arrive: that
// asm has no memory clobber, and the stores this arrival publishes must not be moved below it.
__device__ __forceinline__ void moe_mbar_arrive(const std::uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(std::uint32_t(__cvta_generic_to_shared(bar)))
               : "memory");
}
// All threads of both CTAs of the cluster (barrier.cluster, not .aligned: callers may be divergent).
__device__ __forceinline__ void moe_cluster_sync() {
  asm volatile("barrier.cluster.arrive;\n" ::: "memory");
  asm volatile("barrier.cluster.wait;\n" ::: "memory");
}

}  // namespace xstage::moe
