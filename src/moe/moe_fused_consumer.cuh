// The consumer role of the fused MoE kernel: the two MMA warpgroups (256 threads, 64 accumulator rows
// each). For each tile of their copy of the scheduler they run the GMMA mainloop over the pipeline
// (moe_fused_mainloop.cuh), then the tile's epilogue (moe_fused_epilogue.cuh):
//   Linear-1: SwiGLU into h, fence.proxy.async.global (the rows are read next by other CTAs' TMA), then
//     the hand-over to the releaser (MoeL1Handoff);
//   Linear-2: the Combine rows back to their source ranks, at once or piggybacked on the next tile's
//     k-steps; the padding N-tile of an odd count is only drained (moe_drain_tile).
// After the last tile (and the last piggybacked stores) both warpgroups meet, and one thread per rank
// publishes this CTA's completion flag there (st.release.sys), which the completion kernel waits for.
// Accumulators are declared per tile kind: nothing but the schedule state lives across tiles, so the
// register allocator never has to spill an accumulator that an in-flight GMMA still writes.
#pragma once

#include <cstdint>

#include <cute/tensor.hpp>

#include "moe_fused_epilogue.cuh"
#include "moe_fused_handoff.cuh"
#include "moe_fused_kernel.hpp"
#include "moe_fused_mainloop.cuh"
#include "moe_fused_storage.cuh"
#include "moe_fused_sync.cuh"
#include "moe_fused_trace.cuh"
#include "xstage/gpu/named_barrier.cuh"
#include "xstage/gpu/ptx_memory.cuh"
#include "xstage/moe/moe_numerics.hpp"
#include "xstage/sched/moe_schedule.hpp"

namespace xstage::moe::fused_detail {

// Every thread of both consumer warpgroups calls.
template <class T, class Schedule>
__device__ __forceinline__ void moe_consumers(const MoeFusedKernelParams& p, MoeFusedKernelStorage<T>& smem,
                                              typename T::Pipeline& pipe, MoePairCoord pair) {
  using namespace cute;
  const int el = p.shape.experts / p.shape.ranks;
  const int n2 = l2_tiles(p.shape.hidden);
  const sched::MoeRowLayout layout = moe_row_layout(p, smem.layout);
  const int mma_thread_idx = int(threadIdx.x) - 128;
  const int mma_wg_thread = moe_mma_wg_thread();  // warp-uniform: the GMMA descriptors' warpgroup
  Schedule schedule(layout, pair.instance, pair.instances, pair.role, p.shape.schedule_param);
  typename T::Pipeline::PipelineState read;
  typename T::TiledMma mma;
  sched::MoeTile tile{};
  MoeTileTracer trace{p, mma_thread_idx};
  MoeL1Handoff& handoff = smem.main.l1_handoff;
  // Piggybacked Combine (p.epilogue.combine): the previous Linear-2 tile's stores, one chunk per k-step.
  MoeCombinePending pending{0, 0, 0, kCombineChunksPerThread<T>};
  const bool piggyback = p.epilogue.combine != MoeCombineIssue::kEpilogue;
  auto issue = [&] {
    if (piggyback) moe_combine_issue_pending<T>(p, smem.main, pending, 1, mma_thread_idx);
  };
  std::uint32_t l1_count = 0;  // Linear-1 tiles so far: the hand-off's state (and the FP8 maxima exchange's)
  while (schedule.next(tile)) {
    if (moe_gemm_only_skips(p.mainloop.gemm_only, tile.stage)) continue;
    if (tile.stage == sched::MoeStage::kLinear1) {
      trace.begin(tile);
      Tensor acc = partition_fragment_C(mma, Shape<Int<T::kBlockM>, Int<T::kBlockN>>{});
      if constexpr (T::kFp8) {
        const int kb = p.shape.hidden / T::kBlockK;  // 128-channel groups = k-steps
        const long long r0 = (long long)tile.row * T::kBlockM + acc_row(mma_thread_idx, 0);
        const float* w1s = p.mainloop.w1_scale + (long long)tile.expert * (2 * p.shape.h_inter / 128) * kb;
        const MoeFp8TileScales sc{p.mainloop.recv_scale + r0 * kb, p.mainloop.recv_scale + (r0 + 8) * kb,
                                  w1s + (tile.n / 2) * kb, w1s + (p.shape.h_inter / 128 + tile.n / 2) * kb};
        moe_mma_tile_fp8<T, 1>(smem.main, pipe, read, acc, kb, mma_wg_thread, sc, p, issue, trace.first_stage());
      } else {
        moe_mma_tile<T>(smem.main, pipe, read, acc, p.shape.hidden / T::kBlockK, mma_wg_thread, p, issue,
                        trace.first_stage());
      }
      moe_store_swiglu<T>(p, smem.main, tile, acc, mma_thread_idx, l1_count);
      gpu::fence_proxy_async_global();  // SwiGLU rows are read next by TMA (other CTAs' producers)
      const MoeL1Handoff::State slot = MoeL1Handoff::state(l1_count);
      handoff.producer_acquire(slot, p, tile.row);
      handoff.producer_commit(slot, mma_thread_idx);
      ++l1_count;
      trace.end();
    } else {
      if (tile.n >= n2) {
        moe_drain_tile<T>(pipe, read, p.shape.h_inter / T::kBlockK, mma_wg_thread, p);
        continue;
      }
      trace.begin(tile);
      Tensor acc = partition_fragment_C(mma, Shape<Int<T::kBlockM>, Int<T::kBlockN>>{});
      if constexpr (T::kFp8) {
        const int kb = p.shape.h_inter / T::kBlockK,
                  hg = p.shape.h_inter / kFp8GroupSize;  // k-steps = 128-channel groups
        const long long r0 = (long long)tile.row * T::kBlockM + acc_row(mma_thread_idx, 0);
        const float* w2s = p.mainloop.w2_scale + ((long long)tile.expert * (p.shape.hidden / 128) + tile.n) * kb;
        const MoeFp8TileScales sc{p.epilogue.h_scale + r0 * hg, p.epilogue.h_scale + (r0 + 8) * hg, w2s, w2s};
        moe_mma_tile_fp8<T, 1>(smem.main, pipe, read, acc, kb, mma_wg_thread, sc, p, issue, trace.first_stage());
      } else {
        moe_mma_tile<T>(smem.main, pipe, read, acc, p.shape.h_inter / T::kBlockK, mma_wg_thread, p, issue,
                        trace.first_stage());
      }
      // GEMM-only: no valid row, so the tile is staged in shared memory and nothing is stored.
      const int valid = p.mainloop.gemm_only != MoeGemmOnly::kOff
                            ? 0
                            : smem.layout.tot[p.shape.rank * el + tile.expert] - tile.m * T::kBlockM;
      moe_store_combine<T>(p, smem.main, tile, valid, acc, mma_thread_idx, piggyback, pending, trace.store());
      trace.end();
    }
  }
  trace.finish();
  // The last Linear-2 tile's piggybacked stores have no next tile: issued before the completion flags.
  if (piggyback) moe_combine_issue_pending<T>(p, smem.main, pending, kCombineChunksPerThread<T>, mma_thread_idx);
  gpu::named_barrier_sync(T::kNumMmaThreads, MoeNamedBarrier::kConsumers);
  if (mma_thread_idx < p.shape.ranks) {
    gpu::publish_flag_release(p.sync.done_flag_peer[mma_thread_idx] + p.shape.rank * kFusedMaxGrid + blockIdx.x,
                              p.shape.epoch);
  }
}

}  // namespace xstage::moe::fused_detail
