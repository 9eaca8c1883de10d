// Synchronisation of the fused MoE kernel: its named barriers, its failure record and its bounded waits.
// Every wait of the kernel goes through gpu::bounded_wait (include/xstage/gpu/bounded_wait.cuh) with the
// one recorder below; the three forms differ only in what they poll:
//   moe_wait_geq:    a counter or flag in global memory until it reaches a target (64 ns back-off);
//   moe_wait_phase:  a shared-memory barrier until a phase of a given parity has completed;
//   moe_wait_stage:  a CUTLASS pipeline barrier (try_wait token, then the pipeline's own commit).
// 64-bit arrival counters are monotonic across runs (no reset, so no race between one rank's reset and
// a peer's next-run increments); each run waits for base + this run's rows. An expired wait writes what it
// waited for to host-mapped memory and traps (no printf: a call inside the GMMA kernel serializes its
// wgmma instructions). The PTX of the counters, flags, loads and barriers they poll is in
// include/xstage/gpu/ptx_*.cuh; the memory-ordering contract in docs/memory_ordering.md.
#pragma once

#include <cstdint>

#include <cutlass/arch/barrier.h>

#include "moe_fused_kernel.hpp"
#include "xstage/gpu/bounded_wait.cuh"
#include "xstage/gpu/named_barrier.cuh"
#include "xstage/gpu/ptx_mbarrier.cuh"
#include "xstage/gpu/ptx_memory.cuh"

namespace xstage::moe {

// The named barriers of the fused MoE kernel (gpu::named_barrier_sync; CUTLASS adds its reserved count).
// The kernel's shared-memory barriers (mbarriers) are fields of its SharedStorage: the pipeline's, the
// FP8 maxima exchange's (amax_bar) and the Linear-1 hand-off's (MoeL1Handoff).
enum class MoeNamedBarrier : std::uint32_t {
  kConsumers = 0,   // both consumer warpgroups (kNumMmaThreads)
  kWarpgroup0 = 1,  // + consumer warpgroup index: one warpgroup (staging, drained stages)
  kWarpgroup1 = 2,
  kCount
};
static_assert(gpu::kNamedBarriersFit<MoeNamedBarrier>);

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

// Bounded spin until load() >= target (64 ns back-off; the caller follows it with whatever fence its
// readers need). Past timeout_ns: moe_fail_wait(code, index, target, last value seen).
template <class Load>
__device__ __forceinline__ void moe_wait_geq(Load load, std::uint64_t target, std::uint64_t timeout_ns,
                                             MoeFusedWaitFailure* failure, std::uint32_t code, std::uint32_t rank,
                                             std::uint32_t index) {
  gpu::bounded_wait<64>(
      load, [target](std::uint64_t seen) { return seen >= target; }, timeout_ns,
      [=](std::uint64_t seen, std::uint64_t) { moe_fail_wait(failure, code, rank, index, target, seen); });
}

// Bounded wait (acquire at cluster scope) for the phase of parity `parity` of this CTA's shared-memory
// barrier `bar`; recorded as moe_wait_geq's wait for 1 (seen 0).
__device__ __forceinline__ void moe_wait_phase(const std::uint64_t* bar, std::uint32_t parity, std::uint64_t timeout_ns,
                                               MoeFusedWaitFailure* failure, std::uint32_t code, std::uint32_t rank,
                                               std::uint32_t index) {
  moe_wait_geq([&] { return std::uint64_t(gpu::mbar_try_wait_parity_acquire_cluster(bar, parity)); }, 1, timeout_ns,
               failure, code, rank, index);
}

// A pipeline barrier wait with a bound: try_wait() until its token says the phase is complete (no
// back-off: try_wait suspends by itself), then commit(token). Past p.sync.timeout_ns it records the wait
// (failure code `code`, index = the stage, target = its phase, seen = the count of the State) and traps.
template <class State, class Try, class Commit>
__device__ __forceinline__ void moe_wait_stage(Try&& try_wait, Commit&& commit, State const& s,
                                               MoeFusedKernelParams const& p, std::uint32_t code) {
  const auto token = gpu::bounded_wait<0>(
      try_wait, [](auto t) { return !(t == cutlass::BarrierStatus::WaitAgain); }, p.sync.timeout_ns,
      [&p, code, &s](auto const&, std::uint64_t) {
        moe_fail_wait(p.sync.failure, code, p.shape.rank, s.index(), s.phase(), s.count());
      });
  commit(token);
}

}  // namespace xstage::moe
