// The one bounded wait of the device code: every spin on a flag, a counter or a pipeline barrier goes
// through bounded_wait, so no kernel can hang silently (docs/memory_ordering.md, "Bounded waits"). The
// waits differ only in what they poll, when the poll succeeds, how long they back off between polls,
// and what they record before the trap:
//   attention pipelines: AttnWaitFailure (device global: role, stage, phase, block, thread; attn_wait.cuh)
//   fused MoE: MoeFusedWaitFailure (host-mapped: MoeWaitCode, rank, block, thread, index, target, seen;
//     moe_fused_sync.cuh), read and named by the host once the launch has failed
//   flags and grid barriers: a printf naming the WaitSite (flags.cuh); kernels with GMMA code cannot use
//     it, since any call inside their GMMA region makes ptxas serialize every wgmma (warnings C7510, C7507)
#pragma once

#include <cstdint>

#include "xstage/gpu/timer.cuh"

namespace xstage::gpu {

// What a wait does once its recorder has run.
enum class WaitTimeout {
  kTrap,    // trap: the kernel ends with an error the host sees at its next synchronising call
  kGiveUp,  // return the observation that is not done (tests of the timeout path, waits that report)
};

// Polls until done(poll()) and returns the last observation. The first poll is free of any timer read
// (the common case: the value is already there); after a failed one the wait reads %globaltimer once and
// then repeats rounds until a poll is done. With a back-off (kSleepNs > 0, __nanosleep) a round checks
// the deadline, sleeps and polls, so it never sleeps past the deadline; without one (kSleepNs == 0, for
// polls such as mbarrier.try_wait that suspend by themselves) a round polls and, when not done, checks
// the deadline. Past timeout_ns the wait calls on_timeout(observation, waited_ns), which records who
// waited for what, then traps (kTrap) or returns that observation (kGiveUp).
// Invariants: with kTrap the wait returns only an observation that is done, and the compiler sees this
// (after the trap the loop goes on instead of returning), so callers' checks of the result fold away;
// the recorder runs only on an observation that is not done.
template <std::uint32_t kSleepNs, WaitTimeout kOnTimeout = WaitTimeout::kTrap, class Poll, class Done,
          class OnTimeout>
__device__ __forceinline__ auto bounded_wait(Poll&& poll, Done&& done, std::uint64_t timeout_ns,
                                             OnTimeout&& on_timeout) {
  auto seen = poll();
  if (done(seen)) return seen;
  const std::uint64_t t0 = globaltimer_ns();
  for (;;) {
    if constexpr (kSleepNs > 0) {
      const std::uint64_t waited_ns = globaltimer_ns() - t0;
      if (waited_ns > timeout_ns) {
        on_timeout(seen, waited_ns);
        if constexpr (kOnTimeout == WaitTimeout::kGiveUp) return seen;
        __trap();
      }
      __nanosleep(kSleepNs);
      seen = poll();
      if (done(seen)) return seen;
    } else {
      seen = poll();
      if (done(seen)) return seen;
      const std::uint64_t waited_ns = globaltimer_ns() - t0;
      if (waited_ns > timeout_ns) {
        on_timeout(seen, waited_ns);
        if constexpr (kOnTimeout == WaitTimeout::kGiveUp) return seen;
        __trap();
      }
    }
  }
}

}  // namespace xstage::gpu
