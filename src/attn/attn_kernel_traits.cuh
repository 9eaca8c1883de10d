// Compile-time description of the attention forward kernel: tile shapes, shared-memory layouts,
// GMMA tiled MMAs and pipelines. One instantiation per head dimension.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/numeric_types.h>
#include <cutlass/pipeline/sm90_pipeline.hpp>

#include "xstage/sched/attn_tile_config.hpp"

namespace xstage::attn {

// Defaults come from the constexpr tile table; the other parameters exist for tuning builds.
template <int HeadDim, int BlockN_ = sched::attn_tile_config(HeadDim).block_n,
          int Stages = sched::attn_tile_config(HeadDim).kv_stages,
          bool WgGemmOrder = sched::attn_tile_config(HeadDim).wg_gemm_order>
struct AttnKernelTraits {
  static constexpr sched::AttnTileConfig kConfig{sched::attn_tile_config(HeadDim).block_m, BlockN_, Stages,
                                                 sched::attn_tile_config(HeadDim).mma_warpgroups, WgGemmOrder};
  using Element = cutlass::bfloat16_t;
  using ElementAccum = float;

  static constexpr int kHeadDim = HeadDim;
  static constexpr int kBlockM = kConfig.block_m;
  static constexpr int kBlockN = kConfig.block_n;
  static constexpr int kStages = kConfig.kv_stages;
  static constexpr int kNumMmaWarpGroups = kConfig.mma_warpgroups;
  static constexpr bool kWgGemmOrder = kConfig.wg_gemm_order;
  static constexpr int kNumMmaThreads = 128 * kNumMmaWarpGroups;
  static constexpr int kNumThreads = kNumMmaThreads + 128;  // + one producer warpgroup
  static_assert(kBlockM == 64 * kNumMmaWarpGroups, "each consumer warpgroup owns 64 query rows");
  static_assert(kHeadDim % 64 == 0, "128-byte swizzled rows need head_dim a multiple of 64");

  // Register split after setmaxnreg: the producer warpgroup only issues TMA. The CTA starts with
  // 65536 / kNumThreads (168) per thread, and setmaxnreg.inc only draws on what .dec released inside
  // the CTA: (168 - 24) x 128 = (240 - 168) x 256, exactly. A split that frees less blocks the
  // consumers in setmaxnreg.inc forever.
  static constexpr int kProducerRegisters = 24;
  static constexpr int kConsumerRegisters = 240;
  static constexpr int kRegistersAtLaunch = (65536 / kNumThreads) / 8 * 8;
  static_assert((kRegistersAtLaunch - kProducerRegisters) * 128 >=
                    (kConsumerRegisters - kRegistersAtLaunch) * kNumMmaThreads,
                "setmaxnreg split must not ask for more registers than the producer releases");

  using BlockM = cute::Int<kBlockM>;
  using BlockN = cute::Int<kBlockN>;
  using HeadDimT = cute::Int<kHeadDim>;

  // S = Q K^T: both operands from shared memory, K-major. O = P V: P from registers, V^T MN-major.
  using AtomLayoutMma = cute::Layout<cute::Shape<cute::Int<kNumMmaWarpGroups>, cute::_1, cute::_1>>;
  using TiledMmaQK = decltype(cute::make_tiled_mma(
      cute::GMMA::ss_op_selector<Element, Element, ElementAccum, cute::Shape<cute::_64, BlockN, HeadDimT>>(),
      AtomLayoutMma{}));
  using TiledMmaPV = decltype(cute::make_tiled_mma(
      cute::GMMA::rs_op_selector<Element, Element, ElementAccum, cute::Shape<cute::_64, HeadDimT, BlockN>,
                                 cute::GMMA::Major::K, cute::GMMA::Major::MN>(),
      AtomLayoutMma{}));

  using SmemLayoutQ =
      decltype(cute::tile_to_shape(cute::GMMA::Layout_K_SW128_Atom<Element>{}, cute::Shape<BlockM, HeadDimT>{}));
  using SmemLayoutK = decltype(cute::tile_to_shape(cute::GMMA::Layout_K_SW128_Atom<Element>{},
                                                   cute::Shape<BlockN, HeadDimT, cute::Int<kStages>>{}));
  // V is stored as V^T (head_dim x kv rows), contiguous along head_dim: the MN-major B operand of P V.
  using SmemLayoutVt = decltype(cute::tile_to_shape(cute::GMMA::Layout_MN_SW128_Atom<Element>{},
                                                    cute::Shape<HeadDimT, BlockN, cute::Int<kStages>>{},
                                                    cute::Step<cute::_2, cute::_1, cute::_3>{}));

  static constexpr int kBytesQ = kBlockM * kHeadDim * int(sizeof(Element));
  static constexpr int kBytesKV = kBlockN * kHeadDim * int(sizeof(Element));

  using PipelineQ = cutlass::PipelineTmaAsync<1>;
  using PipelineKV = cutlass::PipelineTmaAsync<kStages>;

  struct MainloopStorage {
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutQ>, 1024> smem_q;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutK>, 1024> smem_k;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutVt>, 1024> smem_v;
    typename PipelineQ::SharedStorage pipe_q;
    typename PipelineKV::SharedStorage pipe_k;
    typename PipelineKV::SharedStorage pipe_v;
  };
};

}  // namespace xstage::attn
