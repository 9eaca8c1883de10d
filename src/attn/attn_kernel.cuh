// The attention forward kernel: persistent CTAs, one producer warpgroup (TMA) and kNumMmaWarpGroups
// consumer warpgroups (GMMA + softmax), static tile schedule from sched::AttnTileScheduler (whole tiles,
// and with a split tail segments whose partials meet in the tile's owner, attn_split.cuh), and an
// epilogue policy that receives each finished output tile.
#pragma once

#include <type_traits>

#include <cute/tensor.hpp>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/pipeline/sm90_pipeline.hpp>

#include "attn_mainloop.cuh"
#include "attn_named_barriers.cuh"
#include "attn_split.cuh"
#include "xstage/gpu/ptx_mbarrier.cuh"
#include "xstage/gpu/tma_pipeline.cuh"
#include "xstage/sched/attn_tile_scheduler.hpp"

namespace xstage::attn {

// Optional epilogue hook run by the producer's TMA warp after its last tile:
//   static void producer_finish(Params const&, SharedStorage&);
// (an epilogue that publishes completion flags does it there, off the consumers' register budget).
template <class Epilogue, class = void>
struct EpilogueHasProducerFinish : std::false_type {};
template <class Epilogue>
struct EpilogueHasProducerFinish<Epilogue, std::void_t<decltype(&Epilogue::producer_finish)>> : std::true_type {};

template <class Traits, class Epilogue>
struct AttnForwardKernel {
  using Mainloop = AttnMainloop<Traits>;
  using PipelineQ = typename Traits::PipelineQ;
  using PipelineKV = typename Traits::PipelineKV;

  struct SharedStorage {
    typename Traits::MainloopStorage mainloop;
    typename Epilogue::SharedStorage epilogue;
  };

  struct Params {
    typename Mainloop::Params mainloop;
    typename Epilogue::Params epilogue;
    sched::AttnTileScheduler scheduler;
    AttnSplitParams split;  // the split tail's workspace (scheduler.split() only)
  };

  static constexpr int kSharedBytes = int(sizeof(SharedStorage));
};

// kSplitTail: the schedule's work units (whole tiles, then split tail segments; scheduler.split() plans);
// otherwise whole tiles only. Two instantiations because the unit loop and the merge code cost the
// whole-tile kernel 2.5-3.5 % per tile even where nothing splits (docs/attn_notes.md, round 8).
// Clusters (Traits::kClusterM > 1) run whole tiles of a paired schedule (AttnTileScheduler::paired), the
// CTAs of a cluster adjacent m-blocks of one head, so that their K and V blocks are the same.
template <class Traits, class Epilogue, bool kSplitTail = false>
__global__ void __launch_bounds__(Traits::kNumThreads, 1)
    attn_forward_kernel(CUTE_GRID_CONSTANT typename AttnForwardKernel<Traits, Epilogue>::Params const params) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(Traits::kClusterM == 1 || !kSplitTail, "clusters run whole tiles");
  using namespace cute;
  using Kernel = AttnForwardKernel<Traits, Epilogue>;
  using Mainloop = typename Kernel::Mainloop;
  using PipelineQ = typename Traits::PipelineQ;
  using PipelineKV = typename Traits::PipelineKV;

  extern __shared__ __align__(1024) char smem_raw[];  // 128-byte swizzled tiles need 1024-byte alignment
  auto& storage = *reinterpret_cast<typename Kernel::SharedStorage*>(smem_raw);

  const int warp_idx = cutlass::canonical_warp_idx_sync();
  const int warp_group_idx = cutlass::canonical_warp_group_idx();
  const bool is_producer = warp_group_idx == 0;

  if (warp_idx == 0 && cute::elect_one_sync()) Mainloop::prefetch_descriptors(params.mainloop);

  constexpr int kMma = Traits::kNumMmaThreads;  // each pipeline's barriers initialized by its own warp
  // Every pipeline over the cluster's shape: K and V because a stage's empty barrier must count the
  // consumer warpgroups of every CTA (each CTA's share lands in all of them; its full barrier counts the
  // whole block's bytes from all shares), and Q because a pipeline built for one CTA sends its releases
  // to the cluster's first CTA (cutlass::PipelineTmaAsync's dst_blockid). Q's stage is then refilled once
  // every CTA of the cluster is done with its own Q tile: they run their tiles in lockstep anyway.
  PipelineQ pipe_q(storage.mainloop.pipe_q,
                   gpu::tma_pipeline_params<PipelineQ>(Traits::kBytesQ, is_producer, kMma, 0),
                   typename Traits::ClusterShape{});
  PipelineKV pipe_k(storage.mainloop.pipe_k,
                    gpu::tma_pipeline_params<PipelineKV>(Traits::kBytesK, is_producer, kMma, 1),
                    typename Traits::ClusterShape{});
  PipelineKV pipe_v(storage.mainloop.pipe_v,
                    gpu::tma_pipeline_params<PipelineKV>(Traits::kBytesV, is_producer, kMma, 2),
                    typename Traits::ClusterShape{});
  if constexpr (Traits::kClusterM > 1) {
    gpu::cluster_sync_all_threads();  // every CTA's barriers initialized before any multicast or remote release
  } else {
    __syncthreads();  // barriers initialized before anyone waits on them
  }

  const sched::AttnTileScheduler& scheduler = params.scheduler;
  [[maybe_unused]] const int n_blocks = (params.mainloop.seq_k + Traits::kBlockN - 1) / Traits::kBlockN;

  if (is_producer) {
    cutlass::arch::warpgroup_reg_dealloc<Traits::kProducerRegisters>();
    if (warp_idx == 0) {
      auto q_write = cutlass::make_producer_start_state<PipelineQ>();
      auto k_write = cutlass::make_producer_start_state<PipelineKV>();
      auto v_write = cutlass::make_producer_start_state<PipelineKV>();
      if constexpr (kSplitTail) {
        const int units = scheduler.num_units(int(blockIdx.x), int(gridDim.x));
        for (int i = 0; i < units; ++i) {
          const sched::AttnWorkUnit u = scheduler.unit(int(blockIdx.x), i, int(gridDim.x));
          const sched::AttnTile tile = scheduler.tile(u.tile);
          const bool whole = u.role == sched::AttnUnitRole::kWhole;
          Mainloop::template load<false>(params.mainloop, storage.mainloop, pipe_q, pipe_k, pipe_v, q_write, k_write,
                                         v_write, tile.m_block, tile.head, tile.batch, whole ? 0 : u.kb_begin,
                                         whole ? n_blocks : u.kb_end);
        }
      } else {
        for (int t = scheduler.first_tile(blockIdx.x); scheduler.valid(t); t = scheduler.next_tile(t, gridDim.x)) {
          const sched::AttnTile tile = scheduler.tile(t);
          Mainloop::template load<true>(params.mainloop, storage.mainloop, pipe_q, pipe_k, pipe_v, q_write, k_write,
                                        v_write, tile.m_block, tile.head, tile.batch);
        }
      }
      if constexpr (EpilogueHasProducerFinish<Epilogue>::value) {
        Epilogue::producer_finish(params.epilogue, storage.epilogue);
      }
    }
  } else {
    cutlass::arch::warpgroup_reg_alloc<Traits::kConsumerRegisters>();
    const int mma_thread_idx = int(threadIdx.x) - 128;
    if constexpr (Traits::kWgGemmOrder) {
      // The first consumer warpgroup holds the first turn; the turn passes round the warpgroups in order.
      if (mma_thread_idx < 128) gpu::named_barrier_arrive(2 * 128, AttnNamedBarrier::kWgOrder0);
    }
    typename PipelineQ::PipelineState q_read;
    typename PipelineKV::PipelineState k_read;
    typename PipelineKV::PipelineState v_read;
    typename Traits::TiledMmaPV mma_pv;
    if constexpr (kSplitTail) {
      const int units = scheduler.num_units(int(blockIdx.x), int(gridDim.x));
      for (int i = 0; i < units; ++i) {
        const sched::AttnWorkUnit u = scheduler.unit(int(blockIdx.x), i, int(gridDim.x));
        const sched::AttnTile tile = scheduler.tile(u.tile);
        const bool whole = u.role == sched::AttnUnitRole::kWhole;
        Tensor acc_o = partition_fragment_C(mma_pv, Shape<typename Traits::BlockM, typename Traits::HeadDimT>{});
        OnlineSoftmax<2, Traits::kFp8> softmax(params.mainloop.softmax_scale, params.mainloop.scale_log2);
        Mainloop::template mma<false>(params.mainloop, storage.mainloop, pipe_q, pipe_k, pipe_v, q_read, k_read,
                                      v_read, acc_o, softmax, mma_thread_idx, tile.m_block, tile.head, tile.batch,
                                      whole ? 0 : u.kb_begin, whole ? n_blocks : u.kb_end);
        if (u.role == sched::AttnUnitRole::kHelper) {
          AttnSplit<Traits>::publish(params.split, int(blockIdx.x), acc_o, softmax, mma_thread_idx);
          continue;
        }
        if (u.role == sched::AttnUnitRole::kOwner) {
          AttnSplit<Traits>::merge(params.split, u.merge_first, u.merge_last, acc_o, softmax, mma_thread_idx);
        }
        auto lse = softmax.finalize(acc_o);
        if constexpr (Traits::kFp8) {
          Mainloop::apply_v_scale(params.mainloop, acc_o, mma_thread_idx, tile.head, tile.batch);
          Mainloop::restore_lse(params.mainloop, lse, mma_thread_idx, tile.m_block, tile.head, tile.batch);
        }
        Epilogue::template store<typename Traits::TiledMmaPV>(params.epilogue, storage.epilogue, tile, u.last_store,
                                                              acc_o, lse, mma_thread_idx);
      }
    } else {
      for (int t = scheduler.first_tile(blockIdx.x); scheduler.valid(t); t = scheduler.next_tile(t, gridDim.x)) {
        const sched::AttnTile tile = scheduler.tile(t);
        Tensor acc_o = partition_fragment_C(mma_pv, Shape<typename Traits::BlockM, typename Traits::HeadDimT>{});
        OnlineSoftmax<2, Traits::kFp8> softmax(params.mainloop.softmax_scale, params.mainloop.scale_log2);
        Mainloop::template mma<true>(params.mainloop, storage.mainloop, pipe_q, pipe_k, pipe_v, q_read, k_read,
                                     v_read, acc_o, softmax, mma_thread_idx, tile.m_block, tile.head, tile.batch);
        auto lse = softmax.finalize(acc_o);
        if constexpr (Traits::kFp8) {
          Mainloop::apply_v_scale(params.mainloop, acc_o, mma_thread_idx, tile.head, tile.batch);
          Mainloop::restore_lse(params.mainloop, lse, mma_thread_idx, tile.m_block, tile.head, tile.batch);
        }
        Epilogue::template store<typename Traits::TiledMmaPV>(params.epilogue, storage.epilogue, tile,
                                                              scheduler.last_of_cta(t, gridDim.x), acc_o, lse,
                                                              mma_thread_idx);
      }
    }
    Epilogue::finish(params.epilogue, storage.epilogue, mma_thread_idx);
  }
  if constexpr (Traits::kClusterM > 1) {
    // No CTA exits while another may still multicast into it or release its stages remotely.
    gpu::cluster_sync_all_threads();
  }
#else
  // Built for another architecture: the launcher refuses devices other than sm_90a.
  __trap();
#endif
}

}  // namespace xstage::attn
