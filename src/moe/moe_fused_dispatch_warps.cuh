// The dispatch-warps role of the fused MoE kernel: warps 1-3 of the producer warpgroup, concurrent with
// the GEMM tiles (the TMA warp waits for each expert's arrival count). They copy this rank's token rows
// into the owners' receive buffers (moe_dispatch, moe_fused_dispatch.cuh). GEMM-only launches dispatch
// nothing.
// The releaser: lane 0 of warp 3 (kReleaserWarp) is also the consumer side of the Linear-1 hand-off
// (MoeL1Handoff, moe_fused_handoff.cuh). For each Linear-1 tile of its CTA, in the scheduler's order, it
// waits for the consumer warps' hand-over and publishes the tile: l1_done[row] += 1 with release at gpu
// scope, which the Linear-2 tiles of that row (on any CTA of the rank) wait for. While its warp
// dispatches it publishes the hand-offs already complete after every row the warp copies (a
// non-blocking test); once the dispatch is done it waits (bounded) for the rest in turn. Lane 0 alone
// walks the schedule, its state in shared memory (MoeReleaserState).
// The releaser's steps are lambdas in this frame, sharing its count n by reference (docs/moe_notes.md,
// "Fused kernel structure": other forms let the compiler keep the schedule's shared-memory state in the
// producer warps' 40 registers).
#pragma once

#include <cstdint>
#include <new>

#include "moe_fused_dispatch.cuh"
#include "moe_fused_handoff.cuh"
#include "moe_fused_kernel.hpp"
#include "moe_fused_storage.cuh"
#include "xstage/gpu/ptx_memory.cuh"
#include "xstage/sched/moe_schedule.hpp"

namespace xstage::moe::fused_detail {

inline constexpr int kDispatchWarps = 3;  // warps 1-3 of the producer warpgroup (warp 0: TMA)
inline constexpr int kReleaserWarp = 3;   // the dispatch warp whose lane 0 publishes the Linear-1 tiles

// warp_idx: the calling warp (1 .. kDispatchWarps) of the CTA; the whole warp calls.
template <class T, class Schedule>
__device__ __forceinline__ void moe_dispatch_warps(const MoeFusedKernelParams& p, MoeFusedKernelStorage<T>& smem,
                                                   int warp_idx, MoePairCoord pair) {
  const bool releaser = warp_idx == kReleaserWarp && threadIdx.x % 32 == 0;
  static_assert(sizeof(Schedule) <= MoeReleaserState::kScheduleBytes && alignof(Schedule) <= 8);
  Schedule& schedule = *reinterpret_cast<Schedule*>(smem.releaser.schedule);
  sched::MoeTile& tile = smem.releaser.tile;
  if (releaser)
    new (&schedule)
        Schedule(moe_row_layout(p, smem.layout), pair.instance, pair.instances, pair.role, p.shape.schedule_param);
  MoeL1Handoff& handoff = smem.main.l1_handoff;
  std::uint32_t n = 0;  // Linear-1 tiles published so far (the hand-off's state)
  bool have = false;    // `tile` is the next Linear-1 tile to publish
  auto next_l1 = [&] {
    have = false;
    while (!have && schedule.next(tile))
      have = !moe_gemm_only_skips(p.mainloop.gemm_only, tile.stage) && tile.stage == sched::MoeStage::kLinear1;
  };
  auto release = [&] {
    gpu::arrive_counter_release_gpu(p.mainloop.l1_done + tile.row, 1);
    handoff.consumer_release(n);
    ++n;
    next_l1();
  };
  if (releaser) next_l1();
  if (p.mainloop.gemm_only == MoeGemmOnly::kOff) {
    moe_dispatch(p, smem.layout, int(blockIdx.x) * kDispatchWarps + warp_idx - 1, int(gridDim.x) * kDispatchWarps, [&] {
      if (releaser) {
        while (have && handoff.consumer_test(n)) release();
      }
      __syncwarp();
    });
  }
  if (releaser) {
    while (have) {
      handoff.consumer_wait(n, p, tile.row);
      release();
    }
  }
  __syncwarp();
}

}  // namespace xstage::moe::fused_detail
