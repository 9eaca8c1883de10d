// Compile-time description of the attention forward kernel: tile shapes, shared-memory layouts,
// GMMA tiled MMAs and pipelines. One instantiation per head dimension and operand precision.
//
// Operand precision (kFp8): bf16 Q, K, V in shared memory, or their 8-bit quantization
// (attn_fp8_quant.hpp): Q and K in s8 (S accumulates in int32), P and V in e4m3. 8-bit GMMA
// reads both operands K-major, so the FP8 path keeps V as V^T with the key index contiguous (a layout
// the quantization pre-pass writes); the bf16 path reads V as stored, the MN-major B operand of P V.
// The output (Element) is bf16 in both.
#pragma once

#include <type_traits>

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/numeric_types.h>
#include <cutlass/pipeline/sm90_pipeline.hpp>

#include "attn_fp8_quant.hpp"
#include "xstage/sched/attn_tile_config.hpp"
#include "xstage/sched/attn_tuning.hpp"

namespace xstage::attn {

// Defaults come from the constexpr tile table; the other parameters exist for tuning builds.
template <int HeadDim, int BlockN_ = sched::attn_tile_config(HeadDim).block_n,
          int Stages = sched::attn_tile_config(HeadDim).kv_stages,
          bool WgGemmOrder = sched::attn_tile_config(HeadDim).wg_gemm_order, bool Fp8 = false, int ClusterM = 1>
struct AttnKernelTraits {
  // Query rows and consumer warpgroups: the bf16 or the FP8 tile table's for the head dimension.
  static constexpr sched::AttnTileConfig kTable = sched::attn_kernel_tile_config(HeadDim, Fp8);
  static constexpr sched::AttnTileConfig kConfig{kTable.block_m, BlockN_, Stages, kTable.mma_warpgroups, WgGemmOrder,
                                                 ClusterM};
  static constexpr bool kFp8 = Fp8;
  using Element = cutlass::bfloat16_t;  // the output tile (and the operands of the bf16 path)
  using ElementMma = std::conditional_t<kFp8, cutlass::float_e4m3_t, cutlass::bfloat16_t>;  // V (and P) operands
  using ElementQK = std::conditional_t<kFp8, int8_t, ElementMma>;  // Q, K operands
  using ElementAccum = float;
  using ElementAccumQK = std::conditional_t<kFp8, int32_t, float>;

  static constexpr int kHeadDim = HeadDim;
  static constexpr int kBlockM = kConfig.block_m;
  static constexpr int kBlockN = kConfig.block_n;
  static constexpr int kStages = kConfig.kv_stages;
  static constexpr int kNumMmaWarpGroups = kConfig.mma_warpgroups;
  static constexpr bool kWgGemmOrder = kConfig.wg_gemm_order;
  // CTAs per cluster (sched::AttnTileConfig::cluster_m): each loads its 1 / kClusterM share of a K or V
  // block (rows of K, head-dim rows of V^T) and multicasts it into every CTA of the cluster; a stage is
  // refilled once all of them released it (cutlass::PipelineTmaAsync over ClusterShape).
  static constexpr int kClusterM = ClusterM;
  using ClusterShape = cute::Shape<cute::Int<kClusterM>, cute::_1, cute::_1>;
  static_assert(kClusterM == 1 || kClusterM == 2, "CTA pairs at most (AttnTileScheduler::paired)");
  static_assert(kClusterM == 1 || !Fp8, "the FP8 kernel runs without clusters");
  static constexpr int kNumMmaThreads = 128 * kNumMmaWarpGroups;
  static constexpr int kNumThreads = kNumMmaThreads + 128;  // + one producer warpgroup
  static_assert(kBlockM == 64 * kNumMmaWarpGroups, "each consumer warpgroup owns 64 query rows");
  static_assert(kHeadDim % 64 == 0, "128-byte swizzled rows need head_dim a multiple of 64");

  // Register split after setmaxnreg: the producer warpgroup only issues TMA. The CTA starts with
  // 65536 / kNumThreads per thread (168 with two consumer warpgroups, 128 with three), and setmaxnreg.inc
  // only draws on what .dec released inside the CTA: (168 - 24) x 128 = (240 - 168) x 256 exactly, and
  // (128 - 24) x 128 >= (160 - 128) x 384. A split that frees less blocks the consumers in setmaxnreg.inc forever.
  static_assert(kConfig.mma_warpgroups == 2 || kConfig.mma_warpgroups == 3, "two or three consumer warpgroups");
  static constexpr int kProducerRegisters = 24;
  static constexpr int kConsumerRegisters = kConfig.mma_warpgroups == 2 ? 240 : 160;
  static constexpr int kRegistersAtLaunch = (65536 / kNumThreads) / 8 * 8;
  static_assert((kRegistersAtLaunch - kProducerRegisters) * 128 >=
                    (kConsumerRegisters - kRegistersAtLaunch) * kNumMmaThreads,
                "setmaxnreg split must not ask for more registers than the producer releases");

  using BlockM = cute::Int<kBlockM>;
  using BlockN = cute::Int<kBlockN>;
  using HeadDimT = cute::Int<kHeadDim>;

  // S = Q K^T: K-major operands, K from shared memory, Q from shared memory or (kQInRegs) registers.
  // O = P V: P from registers; V^T MN-major (bf16) or K-major (FP8, whose GMMA has no MN-major form).
  static constexpr auto kMajorVt = kFp8 ? cute::GMMA::Major::K : cute::GMMA::Major::MN;
  using AtomLayoutMma = cute::Layout<cute::Shape<cute::Int<kNumMmaWarpGroups>, cute::_1, cute::_1>>;
  // Q in registers for S = Q K^T (sched::AttnTileConfig::q_in_regs; bf16 only: the FP8 kernel's s8 Q stays
  // in shared memory), or sched::kAttnTuneQInRegs.
  static constexpr bool kQInRegs = !Fp8 && (sched::kAttnTuneQInRegs < 0 ? sched::attn_tile_config(HeadDim).q_in_regs
                                                                          : sched::kAttnTuneQInRegs != 0);
  using MmaOpQK = std::conditional_t<
      kQInRegs,
      decltype(cute::GMMA::rs_op_selector<ElementQK, ElementQK, ElementAccumQK, cute::Shape<cute::_64, BlockN, HeadDimT>>()),
      decltype(cute::GMMA::ss_op_selector<ElementQK, ElementQK, ElementAccumQK, cute::Shape<cute::_64, BlockN, HeadDimT>>())>;
  // One GMMA spans the key block: CuTe's selector would otherwise split it into narrower instructions without a
  // word (a tuned block_n outside 16/32/64/96/128/192/256 needs CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED, which
  // cmake/XstageAttnTuning.cmake defines for such a knob).
  static_assert(cute::size<1>(typename cute::MMA_Traits<MmaOpQK>::Shape_MNK{}) == kBlockN,
                "S = Q K^T: no single GMMA as wide as the key block (define CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED)");
  using TiledMmaQK = decltype(cute::make_tiled_mma(MmaOpQK{}, AtomLayoutMma{}));
  using TiledMmaPV = decltype(cute::make_tiled_mma(
      cute::GMMA::rs_op_selector<ElementMma, ElementMma, ElementAccum, cute::Shape<cute::_64, HeadDimT, BlockN>,
                                 cute::GMMA::Major::K, kMajorVt>(),
      AtomLayoutMma{}));

  using SmemLayoutQ =
      decltype(cute::tile_to_shape(cute::GMMA::Layout_K_SW128_Atom<ElementQK>{}, cute::Shape<BlockM, HeadDimT>{}));
  using SmemLayoutK = decltype(cute::tile_to_shape(cute::GMMA::Layout_K_SW128_Atom<ElementQK>{},
                                                   cute::Shape<BlockN, HeadDimT, cute::Int<kStages>>{}));
  // V is held as V^T (head_dim x kv rows). bf16: contiguous along head_dim (V as stored), the MN-major
  // B operand of P V. FP8: contiguous along the keys (the pre-pass's V^T), the K-major B operand.
  using SmemLayoutVtBf16 = decltype(cute::tile_to_shape(cute::GMMA::Layout_MN_SW128_Atom<ElementMma>{},
                                                        cute::Shape<HeadDimT, BlockN, cute::Int<kStages>>{},
                                                        cute::Step<cute::_2, cute::_1, cute::_3>{}));
  // Its rows are kBlockN bytes: the widest swizzle atom that divides them (128 x 128 B for 128 keys).
  using VtAtomFp8 = std::conditional_t<
      kBlockN % 128 == 0, cute::GMMA::Layout_K_SW128_Atom<ElementMma>,
      std::conditional_t<kBlockN % 64 == 0, cute::GMMA::Layout_K_SW64_Atom<ElementMma>,
                         cute::GMMA::Layout_K_SW32_Atom<ElementMma>>>;
  using SmemLayoutVtFp8 =
      decltype(cute::tile_to_shape(VtAtomFp8{}, cute::Shape<HeadDimT, BlockN, cute::Int<kStages>>{}));
  using SmemLayoutVt = std::conditional_t<kFp8, SmemLayoutVtFp8, SmemLayoutVtBf16>;

  static constexpr int kBytesQ = kBlockM * kHeadDim * int(sizeof(ElementQK));
  static constexpr int kBytesK = kBlockN * kHeadDim * int(sizeof(ElementQK));
  static constexpr int kBytesV = kBlockN * kHeadDim * int(sizeof(ElementMma));

  using PipelineQ = cutlass::PipelineTmaAsync<1>;
  using PipelineKV = cutlass::PipelineTmaAsync<kStages>;

  struct MainloopStorage {
    cute::array_aligned<ElementQK, cute::cosize_v<SmemLayoutQ>, 1024> smem_q;
    cute::array_aligned<ElementQK, cute::cosize_v<SmemLayoutK>, 1024> smem_k;
    cute::array_aligned<ElementMma, cute::cosize_v<SmemLayoutVt>, 1024> smem_v;
    typename PipelineQ::SharedStorage pipe_q;
    typename PipelineKV::SharedStorage pipe_k;
    typename PipelineKV::SharedStorage pipe_v;
  };
};

// The FP8 kernel of a head dimension: the FP8 tile table's shapes, block_n the quantization pre-pass's
// key-scale block (attn_fp8_quant.hpp).
template <int HeadDim>
using AttnFp8KernelTraits = AttnKernelTraits<HeadDim, kFp8KBlock, sched::attn_fp8_tile_config(HeadDim).kv_stages,
                                             sched::attn_fp8_tile_config(HeadDim).wg_gemm_order, true>;

}  // namespace xstage::attn
