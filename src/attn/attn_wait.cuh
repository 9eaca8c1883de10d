// Bounded waits on CUTLASS pipelines: a persistent kernel must never hang silently. The try_* calls
// return after a hardware-defined slice (no back-off needed between them); gpu::bounded_wait reads
// %globaltimer between slices and, past the limit, records what waited in attn_wait_failure (device
// global, for a debugger or a core dump) and traps. No printf: any function call inside the consumer's
// GMMA region makes ptxas serialize every wgmma of the kernel and drop setmaxnreg (warnings C7510, C7507).
#pragma once

#include <cstdint>

#include <cutlass/pipeline/sm90_pipeline.hpp>

#include "xstage/gpu/bounded_wait.cuh"

namespace xstage::attn {

// No tile of this kernel takes anywhere near this long; reaching it means a lost TMA or a protocol bug.
inline constexpr uint64_t kAttnWaitLimitNs = 4'000'000'000ull;

// Which pipeline wait expired (AttnWaitFailure::role).
enum AttnWaitRole : uint32_t {
  kAttnWaitProducerQ = 0,
  kAttnWaitProducerK = 1,
  kAttnWaitProducerV = 2,
  kAttnWaitConsumerQ = 3,
  kAttnWaitConsumerK = 4,
  kAttnWaitConsumerV = 5,
  kAttnWaitSplitPartial = 6,  // a split tile's owner waiting for a helper's partial (stage: the helper CTA,
                              // phase: the warp)
};

// Which wait expired: role (AttnWaitRole), stage, phase, block and thread.
struct AttnWaitFailure {
  uint32_t role, stage, phase, block, thread;
};
static __device__ AttnWaitFailure attn_wait_failure;

// The record of an expired wait, made visible system-wide before gpu::bounded_wait traps.
__device__ __forceinline__ void attn_record_wait_failure(uint32_t role, uint32_t stage, uint32_t phase) {
  attn_wait_failure = AttnWaitFailure{role, stage, phase, blockIdx.x, threadIdx.x};
  __threadfence_system();
}

// try_wait() until its token says the barrier's phase is complete, bounded, then commit(token).
template <class State, class Try, class Commit>
__device__ __forceinline__ void attn_pipe_wait_bounded(Try&& try_wait, Commit&& commit, State const& state,
                                                       AttnWaitRole role) {
  const auto token = gpu::bounded_wait<0>(
      try_wait, [](auto t) { return !(t == cutlass::BarrierStatus::WaitAgain); }, kAttnWaitLimitNs,
      [role, state](auto const&, uint64_t) { attn_record_wait_failure(role, state.index(), state.phase()); });
  commit(token);
}

template <class Pipeline, class State>
__device__ __forceinline__ void attn_consumer_wait(Pipeline& pipeline, State const& state, AttnWaitRole role) {
  attn_pipe_wait_bounded([&pipeline, state] { return pipeline.consumer_try_wait(state); },
                         [&pipeline, state](auto token) { pipeline.consumer_wait(state, token); }, state, role);
}

// The same, after an earlier consumer_test_wait of that state: no poll at all when it found the stage full.
template <class Pipeline, class State>
__device__ __forceinline__ void attn_consumer_wait(Pipeline& pipeline, State const& state, AttnWaitRole role,
                                                   cutlass::ConsumerToken polled) {
  if (polled == cutlass::BarrierStatus::WaitDone) {
    pipeline.consumer_wait(state, polled);  // returns at once
  } else {
    attn_consumer_wait(pipeline, state, role);
  }
}

template <class Pipeline, class State>
__device__ __forceinline__ void attn_producer_acquire(Pipeline& pipeline, State const& state, AttnWaitRole role) {
  // The leader thread arms the stage's transaction count in producer_acquire.
  attn_pipe_wait_bounded([&pipeline, state] { return pipeline.producer_try_acquire(state); },
                         [&pipeline, state](auto token) { pipeline.producer_acquire(state, token); }, state, role);
}

}  // namespace xstage::attn
