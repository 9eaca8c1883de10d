// The TMA-producer role of the fused MoE kernel: warp 0 of the producer warpgroup. For each tile of its
// copy of the scheduler it waits (lane 0, bounded) for the tile's inputs, then loads the tile's k-steps
// into the pipeline (moe_load_tile, moe_fused_mainloop.cuh):
//   Linear-1: the expert's arrival counter reaches arrive_base + this run's rows of the expert (every
//     source's dispatch of them is complete, acquire at system scope);
//   Linear-2: l1_done[row] reaches the Linear-1 N-tile count of the row (every SwiGLU column block of
//     the row is published, acquire at gpu scope).
// Then fence.proxy.async.global: the generic-proxy writes just acquired (the peers' rows, the SwiGLU
// rows) are ordered before this thread's TMA (async-proxy) reads.
// GEMM-only launches wait for nothing (their operands are the previous run's).
#pragma once

#include <cstdint>

#include <cute/tensor.hpp>
#include <cutlass/pipeline/sm90_pipeline.hpp>

#include "moe_fused_kernel.hpp"
#include "moe_fused_mainloop.cuh"
#include "moe_fused_storage.cuh"
#include "moe_fused_sync.cuh"
#include "xstage/gpu/ptx_memory.cuh"
#include "xstage/sched/moe_schedule.hpp"

namespace xstage::moe::fused_detail {

// The whole warp calls (lane 0 waits, one elected lane issues the loads).
template <class T, class Schedule>
__device__ __forceinline__ void moe_tma_producer(const MoeFusedKernelParams& p, MoeFusedTmaT<T> const& tma,
                                                 MoeFusedKernelStorage<T>& smem, typename T::Pipeline& pipe,
                                                 MoePairCoord pair) {
  const int el = p.shape.experts / p.shape.ranks;
  const int n1 = l1_tiles(p.shape.h_inter), n2 = l2_tiles(p.shape.hidden);
  const sched::MoeRowLayout layout = moe_row_layout(p, smem.layout);
  const int lane = threadIdx.x % 32;
  Schedule schedule(layout, pair.instance, pair.instances, pair.role, p.shape.schedule_param);
  auto write = cutlass::make_producer_start_state<typename T::Pipeline>();
  sched::MoeTile tile;
  while (schedule.next(tile)) {
    if (moe_gemm_only_skips(p.mainloop.gemm_only, tile.stage)) continue;
    // The padding N-tile: load the last real tile's B (any valid block: the consumers only drain it).
    if (tile.stage == sched::MoeStage::kLinear2 && tile.n >= n2) tile.n = n2 - 1;
    if (lane == 0) {
      if (p.mainloop.gemm_only != MoeGemmOnly::kOff) {
        // GEMM-only: no dependency wait (operands of the previous run)
      } else if (tile.stage == sched::MoeStage::kLinear1) {
        const std::uint64_t* c = p.mainloop.arrive + tile.expert;
        const std::uint64_t target =
            p.mainloop.arrive_base[tile.expert] + std::uint64_t(smem.layout.tot[p.shape.rank * el + tile.expert]);
        moe_wait_geq([&] { return gpu::ld_acquire_sys_u64(c); }, target, p.sync.timeout_ns, p.sync.failure,
                     kMoeWaitArrival, p.shape.rank, tile.expert);
      } else {
        const std::uint32_t* c = p.mainloop.l1_done + tile.row;
        moe_wait_geq([&] { return std::uint64_t(gpu::load_counter_acquire_gpu(c)); }, std::uint64_t(n1),
                     p.sync.timeout_ns, p.sync.failure, kMoeWaitL1RowDone, p.shape.rank, tile.row);
      }
      gpu::fence_proxy_async_global();  // peer / SwiGLU generic-proxy writes before this thread's TMA reads
    }
    __syncwarp();
    moe_load_tile<T>(tma, smem.main, pipe, write, tile, p);
  }
}

}  // namespace xstage::moe::fused_detail
