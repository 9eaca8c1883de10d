// The fused MoE kernel template (both precisions; see moe_fused.cu for the design). Included by
// moe_fused.cu (bf16) and moe_fused_fp8.cu (FP8 e4m3), one translation unit per precision.
#pragma once

#include <cstddef>
#include <new>

#include <cute/tensor.hpp>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/pipeline/sm90_pipeline.hpp>

#include "moe_fused_dispatch.cuh"
#include "moe_fused_epilogue.cuh"
#include "moe_fused_kernel.hpp"
#include "moe_fused_mainloop.cuh"
#include "moe_fused_sync.cuh"
#include "xstage/gpu/launch_attr.hpp"
#include "xstage/gpu/tma_pipeline.cuh"
#include "xstage/moe/moe_numerics.hpp"
#include "xstage/sched/moe_schedule.hpp"

namespace xstage::moe {

// The completion/reduction kernel launch (moe_fused.cu), after the fused kernel of `grid` CTAs.
cudaError_t launch_moe_fused_finish(const MoeFusedParams& p, int grid, cudaStream_t stream);
// The FP8 kernels (moe_fused_fp8.cu).
cudaError_t launch_moe_fused_fp8(const MoeFusedParams& p, MoeFusedSchedule schedule, int grid, cudaStream_t stream);

namespace fused_detail {

// The releaser lane's walk of the schedule (either order) and its next Linear-1 tile, in shared memory:
// the dispatch loop that the releaser runs in between keeps no schedule state in the producer warps' 40
// registers (held there, the state spilled the dispatch loop's own values to local memory).
struct MoeReleaserState {
  static constexpr std::size_t kScheduleBytes =
      sizeof(sched::InterleavedMoeScheduler) > sizeof(sched::ExpertWaveMoeScheduler)
          ? sizeof(sched::InterleavedMoeScheduler)
          : sizeof(sched::ExpertWaveMoeScheduler);
  alignas(8) unsigned char schedule[kScheduleBytes];
  sched::MoeTile tile;
};

template <class T>
struct MoeFusedKernelStorage {
  typename T::SharedStorage main;
  MoeLayoutSmem layout;
  MoeReleaserState releaser;
};

// Linear-2 N-tiles rounded up to even (CTA pairs); the padding tile of an odd count is loaded (its A half
// is the partner's too) but neither computed nor stored (moe_drain_tile).
__host__ __device__ inline int l2_tiles(int hidden) { return hidden / MoeFusedTraits::kBlockN; }
__host__ __device__ inline int l2_tiles_even(int hidden) { return (l2_tiles(hidden) + 1) / 2 * 2; }
__host__ __device__ inline int l1_tiles(int h_inter) { return h_inter / (MoeFusedTraits::kBlockN / 2); }

// GEMM-only mode (MoeFusedParams::gemm_only): 1 runs the Linear-1 tiles alone, 2 the Linear-2 tiles.
// What a GEMM-only launch times: count exchange and layout (one flag round trip between the ranks), then
// the scheduler's tiles of that stage with their TMA loads, GMMA mainloop and epilogue (Linear-1: SwiGLU
// into h in local memory and the l1_done increment; Linear-2: the bf16 staging of the accumulator in
// shared memory, no Combine store), then the completion flags.
__host__ __device__ inline bool moe_gemm_only_skips(int gemm_only, sched::MoeStage stage) {
  return (gemm_only == 1 && stage == sched::MoeStage::kLinear2) || (gemm_only == 2 && stage == sched::MoeStage::kLinear1);
}

template <class T, class Schedule>
__global__ void __launch_bounds__(T::kNumThreads, 1) __cluster_dims__(T::kClusterSize, 1, 1)
    moe_fused_kernel(CUTE_GRID_CONSTANT MoeFusedParams const p, CUTE_GRID_CONSTANT MoeFusedTmaT<T> const tma) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace cute;
  using Pipeline = typename T::Pipeline;
  extern __shared__ __align__(1024) char smem_raw[];
  auto& smem = *reinterpret_cast<MoeFusedKernelStorage<T>*>(smem_raw);

  const int warp_idx = cutlass::canonical_warp_idx_sync();
  const bool is_producer = cutlass::canonical_warp_group_idx() == 0;
  if (warp_idx == 0 && cute::elect_one_sync()) {
    prefetch_tma_descriptor(tma.recv.get_tma_descriptor());
    prefetch_tma_descriptor(tma.w1.get_tma_descriptor());
    prefetch_tma_descriptor(tma.h.get_tma_descriptor());
    prefetch_tma_descriptor(tma.w2.get_tma_descriptor());
  }
  Pipeline pipe(smem.main.pipe, gpu::tma_pipeline_params<Pipeline>(T::kStageBytes, is_producer, T::kNumMmaThreads, 0),
                typename T::ClusterShape{});
  if (threadIdx.x == 0) {
    if (T::kFp8) {
      cutlass::arch::ClusterBarrier::init(&smem.main.amax_bar[0], 1);
      cutlass::arch::ClusterBarrier::init(&smem.main.amax_bar[1], 1);
    }
    for (int b = 0; b < 2; ++b) {
      cutlass::arch::ClusterBarrier::init(&smem.main.l1_epi_bar[b], T::kNumMmaThreads / 32);
      cutlass::arch::ClusterBarrier::init(&smem.main.l1_rel_bar[b], 1);
    }
    cutlass::arch::fence_barrier_init();
  }
  gpu::cluster_sync_all_threads();  // the partner's barriers are initialized before any multicast or remote release

  moe_exchange_counts(p, smem.layout);  // ends with __syncthreads (barriers initialized too)

  // Computed in each role's branch, not before the split: values live across warpgroup_reg_dealloc must fit
  // the producer's 40 registers, and with the dispatch warps in that region ptxas spilled them.
  auto row_layout = [&] {
    const int el = p.experts / p.ranks;
    return sched::MoeRowLayout{&smem.layout.offs[p.rank * (el + 1)], el, l1_tiles(p.h_inter) / 2,
                               l2_tiles_even(p.hidden) / 2};
  };
  const int instance = blockIdx.x / 2, instances = gridDim.x / 2, role = blockIdx.x % 2;  // pair = cluster
  constexpr int kReleaserWarp = 3;  // of the producer warpgroup: 0 TMA, 1-3 dispatch, 3 also Linear-1 releases
  constexpr int kDispatchWarps = 3;

  if (is_producer) {
    cutlass::arch::warpgroup_reg_dealloc<T::kProducerRegisters>();
    if (warp_idx != 0) {
      // Dispatch, concurrent with the GEMM tiles (the TMA warp waits for each expert's arrival count). With
      // the row layout computed inside each role's branch ptxas keeps the consumers' GMMA code free of spills.
      // Warp 3 also publishes each Linear-1 tile once the consumers have handed it off: l1_done[row] += 1 with
      // release at gpu scope. Its MEMBAR.GPU waits for the SM's outstanding stores (the SwiGLU rows, and any
      // Combine stores still in flight) here, not in a consumer warp that the next tile's GMMAs wait for. Lane
      // 0 alone walks the schedule. While the warp dispatches, it publishes the hand-offs already complete
      // after every row it copies (a non-blocking test); then it waits (bounded) for the rest in turn.
      const bool releaser = warp_idx == kReleaserWarp && threadIdx.x % 32 == 0;
      static_assert(sizeof(Schedule) <= MoeReleaserState::kScheduleBytes && alignof(Schedule) <= 8);
      Schedule& schedule = *reinterpret_cast<Schedule*>(smem.releaser.schedule);
      sched::MoeTile& tile = smem.releaser.tile;
      if (releaser) new (&schedule) Schedule(row_layout(), instance, instances, role, p.schedule_param);
      std::uint32_t n = 0;  // Linear-1 tiles published so far
      bool have = false;    // `tile` is the next Linear-1 tile to publish
      auto next_l1 = [&] {
        have = false;
        while (!have && schedule.next(tile))
          have = !moe_gemm_only_skips(p.gemm_only, tile.stage) && tile.stage == sched::MoeStage::kLinear1;
      };
      auto release = [&] {
        gpu::arrive_counter_release_gpu(p.l1_done + tile.row, 1);
        gpu::mbar_arrive_cta(&smem.main.l1_rel_bar[n & 1]);
        ++n;
        next_l1();
      };
      if (releaser) next_l1();
      if (p.gemm_only == 0) {
        moe_dispatch(p, smem.layout, int(blockIdx.x) * kDispatchWarps + warp_idx - 1, int(gridDim.x) * kDispatchWarps,
                     [&] {
                       if (releaser) {
                         while (have && gpu::mbar_try_wait_parity_acquire_cluster</*kNeverSuspend=*/true>(
                                            &smem.main.l1_epi_bar[n & 1], (n >> 1) & 1))
                           release();
                       }
                       __syncwarp();
                     });
      }
      if (releaser) {
        while (have) {
          const std::uint64_t* handed = &smem.main.l1_epi_bar[n & 1];
          moe_wait_geq([&] { return std::uint64_t(gpu::mbar_try_wait_parity_acquire_cluster(handed, (n >> 1) & 1)); },
                       1, p.timeout_ns, p.failure, kMoeWaitL1Handoff, p.rank, tile.row);
          release();
        }
      }
      __syncwarp();
    } else {
      const int el = p.experts / p.ranks;
      const int n1 = l1_tiles(p.h_inter), n2 = l2_tiles(p.hidden);
      const sched::MoeRowLayout layout = row_layout();
      const int lane = threadIdx.x % 32;
      Schedule schedule(layout, instance, instances, role, p.schedule_param);
      auto write = cutlass::make_producer_start_state<Pipeline>();
      sched::MoeTile tile;
      while (schedule.next(tile)) {
        if (moe_gemm_only_skips(p.gemm_only, tile.stage)) continue;
        // The padding N-tile: load the last real tile's B (any valid block: the consumers only drain it).
        if (tile.stage == sched::MoeStage::kLinear2 && tile.n >= n2) tile.n = n2 - 1;
        if (lane == 0) {
          if (p.gemm_only != 0) {
            // GEMM-only: no dependency wait (operands of the previous run)
          } else if (tile.stage == sched::MoeStage::kLinear1) {
            const std::uint64_t* c = p.arrive + tile.expert;
            const std::uint64_t target = p.arrive_base[tile.expert] + std::uint64_t(smem.layout.tot[p.rank * el + tile.expert]);
            moe_wait_geq([&] { return gpu::ld_acquire_sys_u64(c); }, target, p.timeout_ns, p.failure, kMoeWaitArrival,
                         p.rank, tile.expert);
          } else {
            const std::uint32_t* c = p.l1_done + tile.row;
            moe_wait_geq([&] { return std::uint64_t(gpu::load_counter_acquire_gpu(c)); }, std::uint64_t(n1),
                         p.timeout_ns, p.failure, kMoeWaitL1RowDone, p.rank, tile.row);
          }
          gpu::fence_proxy_async_global();  // peer / SwiGLU generic-proxy writes before this thread's TMA reads
        }
        __syncwarp();
        moe_load_tile<T>(tma, smem.main, pipe, write, tile, p);
      }
    }
  } else {
    cutlass::arch::warpgroup_reg_alloc<T::kConsumerRegisters>();
    const int el = p.experts / p.ranks;
    const int n1 = l1_tiles(p.h_inter), n2 = l2_tiles(p.hidden);
    const sched::MoeRowLayout layout = row_layout();
    const int mma_thread_idx = int(threadIdx.x) - 128;
    const int mma_wg_thread = moe_mma_wg_thread();  // warp-uniform: the GMMA descriptors' warpgroup
    Schedule schedule(layout, instance, instances, role, p.schedule_param);
    typename Pipeline::PipelineState read;
    typename T::TiledMma mma;
    sched::MoeTile tile{};
    // Accumulators are declared per tile kind: nothing but the schedule state lives across tiles, so
    // the register allocator never has to spill an accumulator that an in-flight GMMA still writes.
#if defined(XSTAGE_MOE_FUSED_TRACE)
    std::uint32_t traced = 0;
    MoeFusedTileTrace rec{};
    auto trace_begin = [&] {
      if (mma_thread_idx == 0) {
        rec = MoeFusedTileTrace{};
        rec.stage = std::uint32_t(tile.stage);
        rec.row = tile.row;
        rec.n = tile.n;
        rec.t_entry = gpu::globaltimer_ns();
      }
    };
    auto trace_end = [&] {
      if (mma_thread_idx == 0 && p.trace != nullptr && traced < std::uint32_t(p.trace_capacity)) {
        p.trace[std::size_t(blockIdx.x) * p.trace_capacity + traced] = rec;
        ++traced;
      }
    };
    std::uint64_t* const t_first = p.trace != nullptr ? &rec.t_first_stage : nullptr;
    std::uint64_t* const t_store = p.trace != nullptr ? &rec.t_store_begin : nullptr;
#else
    auto trace_begin = [] {};
    auto trace_end = [] {};
    std::uint64_t* const t_first = nullptr;
    std::uint64_t* const t_store = nullptr;
#endif
    // Piggybacked Combine (p.combine_piggyback): the previous Linear-2 tile's stores, one chunk per k-step.
    MoeCombinePending pending{0, 0, 0, kCombineChunksPerThread<T>};
    const bool piggyback = p.combine_piggyback != 0;
    auto issue = [&] {
      if (piggyback) moe_combine_issue_pending<T>(p, smem.main, pending, 1, mma_thread_idx);
    };
    std::uint32_t l1_count = 0;  // Linear-1 tiles so far (FP8: the SwiGLU maxima exchange's buffer and phase)
    while (schedule.next(tile)) {
      if (moe_gemm_only_skips(p.gemm_only, tile.stage)) continue;
      if (tile.stage == sched::MoeStage::kLinear1) {
        trace_begin();
        Tensor acc = partition_fragment_C(mma, Shape<Int<T::kBlockM>, Int<T::kBlockN>>{});
        if constexpr (T::kFp8) {
          const int kb = p.hidden / T::kBlockK;  // 128-channel groups = k-steps
          const long long r0 = (long long)tile.row * T::kBlockM + acc_row(mma_thread_idx, 0);
          const float* w1s = p.w1_scale + (long long)tile.expert * (2 * p.h_inter / 128) * kb;
          const MoeFp8TileScales sc{p.recv_scale + r0 * kb, p.recv_scale + (r0 + 8) * kb,
                                    w1s + (tile.n / 2) * kb, w1s + (p.h_inter / 128 + tile.n / 2) * kb};
          moe_mma_tile_fp8<T, 1>(smem.main, pipe, read, acc, kb, mma_wg_thread, sc, p, issue, t_first);
        } else {
          moe_mma_tile<T>(smem.main, pipe, read, acc, p.hidden / T::kBlockK, mma_wg_thread, p, issue,
                          t_first);
        }
        moe_store_swiglu<T>(p, smem.main, tile, acc, mma_thread_idx, l1_count);
        gpu::fence_proxy_async_global();  // SwiGLU rows are read next by TMA (other CTAs' producers)
        // Hand the tile to the releaser warp (one arrival per warp, after its lanes' stores); the slot's
        // previous tile, two Linear-1 tiles ago, must have been published.
        const std::uint32_t slot = l1_count & 1, use = l1_count >> 1;
        if (use > 0) {
          const std::uint64_t* published = &smem.main.l1_rel_bar[slot];
          moe_wait_geq(
              [&] { return std::uint64_t(gpu::mbar_try_wait_parity_acquire_cluster(published, (use - 1) & 1)); }, 1,
              p.timeout_ns, p.failure, kMoeWaitL1Published, p.rank, tile.row);
        }
        __syncwarp();
        if (mma_thread_idx % 32 == 0) gpu::mbar_arrive_cta(&smem.main.l1_epi_bar[slot]);
        ++l1_count;
        trace_end();
      } else {
        if (tile.n >= n2) {
          moe_drain_tile<T>(pipe, read, p.h_inter / T::kBlockK, mma_wg_thread, p);
          continue;
        }
        trace_begin();
        Tensor acc = partition_fragment_C(mma, Shape<Int<T::kBlockM>, Int<T::kBlockN>>{});
        if constexpr (T::kFp8) {
          const int kb = p.h_inter / T::kBlockK, hg = p.h_inter / kFp8GroupSize;  // k-steps = 128-channel groups
          const long long r0 = (long long)tile.row * T::kBlockM + acc_row(mma_thread_idx, 0);
          const float* w2s = p.w2_scale + ((long long)tile.expert * (p.hidden / 128) + tile.n) * kb;
          const MoeFp8TileScales sc{p.h_scale + r0 * hg, p.h_scale + (r0 + 8) * hg, w2s, w2s};
          moe_mma_tile_fp8<T, 1>(smem.main, pipe, read, acc, kb, mma_wg_thread, sc, p, issue, t_first);
        } else {
          moe_mma_tile<T>(smem.main, pipe, read, acc, p.h_inter / T::kBlockK, mma_wg_thread, p, issue,
                          t_first);
        }
        // GEMM-only: no valid row, so the tile is staged in shared memory and nothing is stored.
        const int valid = p.gemm_only != 0 ? 0 : smem.layout.tot[p.rank * el + tile.expert] - tile.m * T::kBlockM;
        moe_store_combine<T>(p, smem.main, tile, valid, acc, mma_thread_idx, piggyback, pending, t_store);
        trace_end();
      }
    }
#if defined(XSTAGE_MOE_FUSED_TRACE)
    if (mma_thread_idx == 0 && p.trace_count != nullptr) p.trace_count[blockIdx.x] = traced;
#endif
    // The last Linear-2 tile's piggybacked stores have no next tile: issued before the completion flags.
    if (piggyback) moe_combine_issue_pending<T>(p, smem.main, pending, kCombineChunksPerThread<T>, mma_thread_idx);
    gpu::named_barrier_sync(T::kNumMmaThreads, MoeNamedBarrier::kConsumers);
    if (mma_thread_idx < p.ranks) {
      gpu::publish_flag_release(p.done_flag_peer[mma_thread_idx] + p.rank * kFusedMaxGrid + blockIdx.x, p.epoch);
    }
  }
  // Neither CTA of the pair exits while the other may still multicast into it or release its stages.
  gpu::cluster_sync_all_threads();
#else
  __trap();  // built for another architecture: the launcher refuses devices other than sm_90a
#endif
}

template <class T, class Schedule>
cudaError_t launch_fused(const MoeFusedParams& p, int grid, cudaStream_t stream) {
  constexpr int smem_bytes = int(sizeof(MoeFusedKernelStorage<T>));
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return e;
  if ((e = gpu::set_max_dynamic_shared_memory_once<moe_fused_kernel<T, Schedule>>(device, smem_bytes)) != cudaSuccess)
    return e;
  const MoeFusedTmaT<T> tma = make_moe_fused_tma<T>(p);
  if (p.kernel_begin != nullptr && (e = cudaEventRecord(p.kernel_begin, stream)) != cudaSuccess) return e;
  moe_fused_kernel<T, Schedule><<<grid, T::kNumThreads, smem_bytes, stream>>>(p, tma);
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  if (p.kernel_end != nullptr && (e = cudaEventRecord(p.kernel_end, stream)) != cudaSuccess) return e;
  return launch_moe_fused_finish(p, grid, stream);
}

template <class T>
cudaError_t launch_fused_schedule(const MoeFusedParams& p, MoeFusedSchedule schedule, int grid, cudaStream_t stream) {
  return schedule == MoeFusedSchedule::kWave ? launch_fused<T, sched::ExpertWaveMoeScheduler>(p, grid, stream)
                                             : launch_fused<T, sched::InterleavedMoeScheduler>(p, grid, stream);
}

}  // namespace fused_detail

}  // namespace xstage::moe
