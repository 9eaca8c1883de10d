// Bounded waits on CUTLASS pipelines: a persistent kernel must never hang silently. The try_* calls
// return after a hardware-defined slice; between slices we read %globaltimer and trap once the limit
// is passed. The trap carries no printf: any function call inside the consumer's GMMA region makes
// ptxas serialize every wgmma of the kernel and drop setmaxnreg (warnings C7510, C7507). What waited
// is recorded in attn_wait_failure (device global) before the trap, for a debugger or a core dump.
#pragma once

#include <cstdint>

#include <cutlass/pipeline/sm90_pipeline.hpp>

#include "xstage/gpu/timer.cuh"

namespace xstage::attn {

// No tile of this kernel takes anywhere near this long; reaching it means a lost TMA or a protocol bug.
inline constexpr uint64_t kAttnWaitLimitNs = 4'000'000'000ull;

// Which wait expired: role (0 producer Q, 1 producer K, 2 producer V, 3 consumer Q, 4 consumer K,
// 5 consumer V), stage, phase, block and thread.
struct AttnWaitFailure {
  uint32_t role, stage, phase, block, thread;
};
static __device__ AttnWaitFailure attn_wait_failure;

__device__ __forceinline__ void attn_wait_timeout(uint32_t role, uint32_t stage, uint32_t phase) {
  attn_wait_failure = AttnWaitFailure{role, stage, phase, blockIdx.x, threadIdx.x};
  __threadfence_system();
  __trap();
}

template <class Pipeline, class State>
__device__ __forceinline__ void attn_consumer_wait(Pipeline& pipeline, State const& state, uint32_t role) {
  auto token = pipeline.consumer_try_wait(state);
  if (token == cutlass::BarrierStatus::WaitAgain) {
    const uint64_t start = gpu::globaltimer_ns();
    do {
      token = pipeline.consumer_try_wait(state);
      if (token == cutlass::BarrierStatus::WaitAgain && gpu::globaltimer_ns() - start > kAttnWaitLimitNs) {
        attn_wait_timeout(role, state.index(), state.phase());
      }
    } while (token == cutlass::BarrierStatus::WaitAgain);
  }
  pipeline.consumer_wait(state, token);
}

template <class Pipeline, class State>
__device__ __forceinline__ void attn_producer_acquire(Pipeline& pipeline, State const& state, uint32_t role) {
  auto token = pipeline.producer_try_acquire(state);
  if (token == cutlass::BarrierStatus::WaitAgain) {
    const uint64_t start = gpu::globaltimer_ns();
    do {
      token = pipeline.producer_try_acquire(state);
      if (token == cutlass::BarrierStatus::WaitAgain && gpu::globaltimer_ns() - start > kAttnWaitLimitNs) {
        attn_wait_timeout(role, state.index(), state.phase());
      }
    } while (token == cutlass::BarrierStatus::WaitAgain);
  }
  pipeline.producer_acquire(state, token);  // the leader thread arms the stage's transaction count here
}

}  // namespace xstage::attn
