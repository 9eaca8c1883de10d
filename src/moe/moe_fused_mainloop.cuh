// Mainloop of the fused MoE kernel: 128 x 128 output tiles, BK = 64, TMA loads (128-byte swizzle) into
// a kStages-deep pipeline, two consumer warpgroups of 64 rows each on SM90 GMMA (64x128x16, both
// operands from shared memory).
//   Linear-1 tile (row block p, N-tile n): A = received rows, B = [W1 gate rows n·64..+64 ;
//   W1 up rows h_inter + n·64..+64] (two 64-row TMA boxes into one 128-row B tile), so accumulator
//   columns j (gate) and 64 + j (up) sit in the same thread for SwiGLU.
//   Linear-2 tile: A = SwiGLU rows of block p, B = W2 rows n·128..+128.
// Both stages move 32 KiB per k-step, so one pipeline serves both.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/numeric_types.h>
#include <cutlass/pipeline/sm90_pipeline.hpp>

#include "moe_fused_sync.cuh"
#include "xstage/gpu/timer.cuh"
#include "xstage/sched/moe_schedule.hpp"

namespace xstage::moe {

struct MoeFusedTraits {
  using Element = cutlass::bfloat16_t;
  static constexpr int kBlockM = 128, kBlockN = 128, kBlockK = 64, kStages = 5;
  static constexpr int kNumMmaThreads = 256;
  static constexpr int kNumThreads = kNumMmaThreads + 128;
  static constexpr int kProducerRegisters = 40;
  static constexpr int kConsumerRegisters = 232;
  static_assert((168 - kProducerRegisters) * 128 >= (kConsumerRegisters - 168) * kNumMmaThreads);
  static constexpr int kEpiPitch = kBlockN + 8;  // staging row pitch (elements): 16-byte aligned, fewer conflicts

  using TileA = cute::Shape<cute::Int<kBlockM>, cute::Int<kBlockK>>;
  using TileB = cute::Shape<cute::Int<kBlockN>, cute::Int<kBlockK>>;
  using TileBHalf = cute::Shape<cute::Int<kBlockN / 2>, cute::Int<kBlockK>>;
  using SmemLayoutAStage = decltype(cute::tile_to_shape(cute::GMMA::Layout_K_SW128_Atom<Element>{}, TileA{}));
  using SmemLayoutBStage = decltype(cute::tile_to_shape(cute::GMMA::Layout_K_SW128_Atom<Element>{}, TileB{}));
  using SmemLayoutBHalf = decltype(cute::tile_to_shape(cute::GMMA::Layout_K_SW128_Atom<Element>{}, TileBHalf{}));
  using SmemLayoutA = decltype(cute::tile_to_shape(
      cute::GMMA::Layout_K_SW128_Atom<Element>{},
      cute::Shape<cute::Int<kBlockM>, cute::Int<kBlockK>, cute::Int<kStages>>{}));
  using SmemLayoutB = decltype(cute::tile_to_shape(
      cute::GMMA::Layout_K_SW128_Atom<Element>{},
      cute::Shape<cute::Int<kBlockN>, cute::Int<kBlockK>, cute::Int<kStages>>{}));

  using TiledMma = decltype(cute::make_tiled_mma(
      cute::GMMA::ss_op_selector<Element, Element, float,
                                 cute::Shape<cute::_64, cute::Int<kBlockN>, cute::Int<kBlockK>>>(),
      cute::Layout<cute::Shape<cute::_2, cute::_1, cute::_1>>{}));

  static constexpr int kStageBytes = (kBlockM + kBlockN) * kBlockK * int(sizeof(Element));
  using Pipeline = cutlass::PipelineTmaAsync<kStages>;

  using GShape = cute::Shape<int32_t, int32_t>;
  using GStride = cute::Stride<int64_t, cute::_1>;
  using GTensor = decltype(cute::make_tensor(cute::make_gmem_ptr(static_cast<Element const*>(nullptr)), GShape{},
                                             GStride{}));
  using TmaA = decltype(cute::make_tma_copy(cute::SM90_TMA_LOAD{}, GTensor{}, SmemLayoutAStage{}, TileA{}, cute::_1{}));
  using TmaB = decltype(cute::make_tma_copy(cute::SM90_TMA_LOAD{}, GTensor{}, SmemLayoutBStage{}, TileB{}, cute::_1{}));
  using TmaBHalf =
      decltype(cute::make_tma_copy(cute::SM90_TMA_LOAD{}, GTensor{}, SmemLayoutBHalf{}, TileBHalf{}, cute::_1{}));

  struct SharedStorage {
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutA>, 1024> a;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutB>, 1024> b;
    cute::array_aligned<Element, kBlockM * kEpiPitch, 128> epi;  // Combine staging, 64 rows per warpgroup
    typename Pipeline::SharedStorage pipe;
  };
};

// TMA descriptors of one launch (kernel parameters, __grid_constant__).
struct MoeFusedTma {
  MoeFusedTraits::TmaA recv;      // [recv_rows][hidden]
  MoeFusedTraits::TmaBHalf w1;    // [el·2·h_inter][hidden]
  MoeFusedTraits::TmaA h;         // [recv_rows][h_inter]
  MoeFusedTraits::TmaB w2;        // [el·hidden][h_inter]
  int32_t recv_rows, hidden, h_inter, w1_rows, w2_rows;
};

inline MoeFusedTma make_moe_fused_tma(const MoeFusedParams& p) {
  using namespace cute;
  using T = MoeFusedTraits;
  using E = T::Element;
  const int el = p.experts / p.ranks;
  MoeFusedTma t{};
  t.recv_rows = int32_t(p.recv_rows);
  t.hidden = p.hidden;
  t.h_inter = p.h_inter;
  t.w1_rows = el * 2 * p.h_inter;
  t.w2_rows = el * p.hidden;
  auto g = [](const std::uint16_t* ptr, int rows, int cols) {
    return make_tensor(make_gmem_ptr(reinterpret_cast<E const*>(ptr)), T::GShape{rows, cols},
                       T::GStride{int64_t(cols), _1{}});
  };
  t.recv = make_tma_copy(SM90_TMA_LOAD{}, g(p.recv, t.recv_rows, p.hidden), T::SmemLayoutAStage{}, T::TileA{}, _1{});
  t.w1 = make_tma_copy(SM90_TMA_LOAD{}, g(p.w1, t.w1_rows, p.hidden), T::SmemLayoutBHalf{}, T::TileBHalf{}, _1{});
  t.h = make_tma_copy(SM90_TMA_LOAD{}, g(p.h, t.recv_rows, p.h_inter), T::SmemLayoutAStage{}, T::TileA{}, _1{});
  t.w2 = make_tma_copy(SM90_TMA_LOAD{}, g(p.w2, t.w2_rows, p.h_inter), T::SmemLayoutBStage{}, T::TileB{}, _1{});
  return t;
}

template <class Pipeline, class State>
__device__ __forceinline__ void moe_producer_acquire(Pipeline& pipe, State const& s, std::uint64_t timeout_ns) {
  auto token = pipe.producer_try_acquire(s);
  if (token == cutlass::BarrierStatus::WaitAgain) {
    const std::uint64_t t0 = gpu::globaltimer_ns();
    do {
      token = pipe.producer_try_acquire(s);
      if (token == cutlass::BarrierStatus::WaitAgain && gpu::globaltimer_ns() - t0 > timeout_ns) __trap();
    } while (token == cutlass::BarrierStatus::WaitAgain);
  }
  pipe.producer_acquire(s, token);
}

template <class Pipeline, class State>
__device__ __forceinline__ void moe_consumer_wait(Pipeline& pipe, State const& s, std::uint64_t timeout_ns) {
  auto token = pipe.consumer_try_wait(s);
  if (token == cutlass::BarrierStatus::WaitAgain) {
    const std::uint64_t t0 = gpu::globaltimer_ns();
    do {
      token = pipe.consumer_try_wait(s);
      if (token == cutlass::BarrierStatus::WaitAgain && gpu::globaltimer_ns() - t0 > timeout_ns) __trap();
    } while (token == cutlass::BarrierStatus::WaitAgain);
  }
  pipe.consumer_wait(s, token);
}

// Producer (one warp; lane 0 issues): the k-loop loads of one tile. Dependencies are awaited by the
// caller before this is called.
template <class State>
__device__ __forceinline__ void moe_load_tile(MoeFusedTma const& t, MoeFusedTraits::SharedStorage& smem,
                                              MoeFusedTraits::Pipeline& pipe, State& write, sched::MoeTile const& tile,
                                              std::uint64_t timeout_ns) {
  using namespace cute;
  using T = MoeFusedTraits;
  const bool issuer = cute::elect_one_sync();
  Tensor sA = make_tensor(make_smem_ptr(smem.a.data()), T::SmemLayoutA{});
  if (tile.stage == sched::MoeStage::kLinear1) {
    Tensor mA = t.recv.get_tma_tensor(make_shape(t.recv_rows, t.hidden));
    Tensor gA = local_tile(mA, T::TileA{}, make_coord(tile.row, _));  // (BM, BK, k)
    auto [tAg, tAs] = tma_partition(t.recv, _0{}, Layout<_1>{}, group_modes<0, 2>(sA), group_modes<0, 2>(gA));
    Tensor mB = t.w1.get_tma_tensor(make_shape(t.w1_rows, t.hidden));
    // 64-row tile indices of this expert's gate rows n·64 and up rows h_inter + n·64.
    const int gate_tile = tile.expert * (2 * t.h_inter / 64) + tile.n;
    const int up_tile = gate_tile + t.h_inter / 64;
    Tensor gBg = local_tile(mB, T::TileBHalf{}, make_coord(gate_tile, _));
    Tensor gBu = local_tile(mB, T::TileBHalf{}, make_coord(up_tile, _));
    const int k_tiles = t.hidden / T::kBlockK;
    for (int k = 0; k < k_tiles; ++k) {
      moe_producer_acquire(pipe, write, timeout_ns);
      const int s = write.index();
      auto* bar = pipe.producer_get_barrier(write);
      Tensor sBg = make_tensor(make_smem_ptr(smem.b.data() + s * T::kBlockN * T::kBlockK), T::SmemLayoutBHalf{});
      Tensor sBu = make_tensor(make_smem_ptr(smem.b.data() + s * T::kBlockN * T::kBlockK + (T::kBlockN / 2) * T::kBlockK),
                               T::SmemLayoutBHalf{});
      auto [tBgg, tBsg] = tma_partition(t.w1, _0{}, Layout<_1>{}, group_modes<0, 2>(sBg), group_modes<0, 2>(gBg));
      auto [tBgu, tBsu] = tma_partition(t.w1, _0{}, Layout<_1>{}, group_modes<0, 2>(sBu), group_modes<0, 2>(gBu));
      if (issuer) {
        copy(t.recv.with(*bar), tAg(_, k), tAs(_, s));
        copy(t.w1.with(*bar), tBgg(_, k), tBsg);
        copy(t.w1.with(*bar), tBgu(_, k), tBsu);
      }
      ++write;
    }
  } else {
    Tensor mA = t.h.get_tma_tensor(make_shape(t.recv_rows, t.h_inter));
    Tensor gA = local_tile(mA, T::TileA{}, make_coord(tile.row, _));
    auto [tAg, tAs] = tma_partition(t.h, _0{}, Layout<_1>{}, group_modes<0, 2>(sA), group_modes<0, 2>(gA));
    Tensor sB = make_tensor(make_smem_ptr(smem.b.data()), T::SmemLayoutB{});
    Tensor mB = t.w2.get_tma_tensor(make_shape(t.w2_rows, t.h_inter));
    Tensor gB = local_tile(mB, T::TileB{}, make_coord(tile.expert * (t.hidden / T::kBlockN) + tile.n, _));
    auto [tBg, tBs] = tma_partition(t.w2, _0{}, Layout<_1>{}, group_modes<0, 2>(sB), group_modes<0, 2>(gB));
    const int k_tiles = t.h_inter / T::kBlockK;
    for (int k = 0; k < k_tiles; ++k) {
      moe_producer_acquire(pipe, write, timeout_ns);
      const int s = write.index();
      auto* bar = pipe.producer_get_barrier(write);
      if (issuer) {
        copy(t.h.with(*bar), tAg(_, k), tAs(_, s));
        copy(t.w2.with(*bar), tBg(_, k), tBs(_, s));
      }
      ++write;
    }
  }
}

// Consumer: acc = A · B^T over k_tiles k-steps (both warpgroups; each owns 64 rows).
// t_first_stage (traced builds): %globaltimer when the first k-step's operands are ready.
template <class State, class Acc>
__device__ __forceinline__ void moe_mma_tile(MoeFusedTraits::SharedStorage& smem, MoeFusedTraits::Pipeline& pipe,
                                             State& read, Acc& acc, int k_tiles, int mma_thread_idx,
                                             std::uint64_t timeout_ns, std::uint64_t* t_first_stage = nullptr) {
  using namespace cute;
  using T = MoeFusedTraits;
  typename T::TiledMma mma;
  Tensor sA = make_tensor(make_smem_ptr(smem.a.data()), T::SmemLayoutA{});
  Tensor sB = make_tensor(make_smem_ptr(smem.b.data()), T::SmemLayoutB{});
  auto thr = mma.get_thread_slice(mma_thread_idx);
  Tensor tCrA = thr.partition_fragment_A(sA);  // (MMA, MMA_M, MMA_K, stages)
  Tensor tCrB = thr.partition_fragment_B(sB);
  State release = read;
  for (int k = 0; k < k_tiles; ++k) {
    moe_consumer_wait(pipe, read, timeout_ns);
#if defined(XSTAGE_MOE_FUSED_TRACE)
    if (k == 0 && t_first_stage != nullptr) *t_first_stage = gpu::globaltimer_ns();
#endif
    const int s = read.index();
    warpgroup_fence_operand(acc);
    warpgroup_arrive();
    mma.accumulate_ = k == 0 ? GMMA::ScaleOut::Zero : GMMA::ScaleOut::One;
    CUTE_UNROLL
    for (int kk = 0; kk < size<2>(tCrA); ++kk) {
      gemm(mma, tCrA(_, _, kk, s), tCrB(_, _, kk, s), acc);
      mma.accumulate_ = GMMA::ScaleOut::One;
    }
    warpgroup_commit_batch();
    warpgroup_wait<1>();  // the previous k-step's GMMAs are done: its stage may be refilled
    warpgroup_fence_operand(acc);
    if (k > 0) {
      pipe.consumer_release(release);
      ++release;
    }
    ++read;
  }
  warpgroup_wait<0>();
  warpgroup_fence_operand(acc);
  pipe.consumer_release(release);
}

}  // namespace xstage::moe
