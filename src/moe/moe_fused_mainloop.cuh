// Mainloop of the fused MoE kernel: 128 x 128 output tiles, one 128-byte row of K per operand row and
// k-step (bf16: BK = 64; FP8 e4m3: BK = 128), TMA loads (128-byte swizzle) into a kStages-deep pipeline,
// two consumer warpgroups of 64 rows each on SM90 GMMA (both operands from shared memory).
//   Linear-1 tile (row block p, N-tile n): A = received rows, B = [W1 gate rows n·64..+64 ;
//   W1 up rows h_inter + n·64..+64] (two 64-row TMA boxes into one 128-row B tile), so accumulator
//   columns j (gate) and 64 + j (up) sit in the same thread for SwiGLU.
//   Linear-2 tile: A = SwiGLU rows of block p, B = W2 rows n·128..+128.
// Both stages move 32 KiB per k-step in both precisions, so one pipeline serves every tile.
// CTA pairs are 2-CTA clusters: the two CTAs of a pair compute the same row block's tiles in lockstep
// (role r takes N-tile 2j + r of the scheduler's step j), so their A tiles are the same; each CTA loads
// one 64-row half of A and multicasts it into both CTAs' stage (TMA multicast), which cuts the operand
// traffic from L2 per k-step from 32 to 24 KiB per CTA. The pipeline's empty barriers then take the
// release of both CTAs' consumers (cutlass::PipelineTmaAsync with a 2 x 1 cluster).
// FP8 (W8A8): each k-step's GMMAs accumulate into a scratch accumulator that is then promoted into the
// FP32 tile accumulator with its scales (moe_mma_tile_fp8; DeepSeek-style two-level accumulation).
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/numeric_types.h>
#include <cutlass/pipeline/sm90_pipeline.hpp>

#include "moe_fused_handoff.cuh"
#include "moe_fused_sync.cuh"
#include "xstage/gpu/bounded_wait.cuh"
#include "xstage/gpu/named_barrier.cuh"
#include "xstage/gpu/timer.cuh"
#include "xstage/sched/moe_schedule.hpp"

namespace xstage::moe {

template <bool kIsFp8>
struct MoeFusedTraitsT {
  static constexpr bool kFp8 = kIsFp8;
  using Element = std::conditional_t<kIsFp8, cutlass::float_e4m3_t, cutlass::bfloat16_t>;
  static constexpr int kBlockM = 128, kBlockN = 128, kBlockK = 128 / int(sizeof(Element)), kStages = 5;
  static constexpr int kClusterSize = 2;  // CTA pair = cluster: A tiles multicast within it
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
  using ClusterShape = cute::Shape<cute::Int<kClusterSize>, cute::_1, cute::_1>;
  using TmaA = decltype(cute::make_tma_copy(cute::SM90_TMA_LOAD_MULTICAST{}, GTensor{}, SmemLayoutAStage{}, TileA{},
                                            cute::Int<kClusterSize>{}));
  using TmaB = decltype(cute::make_tma_copy(cute::SM90_TMA_LOAD{}, GTensor{}, SmemLayoutBStage{}, TileB{}, cute::_1{}));
  using TmaBHalf =
      decltype(cute::make_tma_copy(cute::SM90_TMA_LOAD{}, GTensor{}, SmemLayoutBHalf{}, TileBHalf{}, cute::_1{}));

  struct SharedStorage {
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutA>, 1024> a;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutB>, 1024> b;
    cute::array_aligned<cutlass::bfloat16_t, kBlockM * kEpiPitch, 128> epi;  // Combine staging (bf16), 64 rows per warpgroup
    typename Pipeline::SharedStorage pipe;
    // FP8 SwiGLU epilogue: the partner CTA's per-row maxima of its 64 h columns of the shared 128-channel
    // group, written by the partner (st.async), double-buffered by Linear-1 tile parity, each buffer with
    // its barrier (per phase: one local arrival expecting kBlockM · 4 bytes). Unused in bf16.
    float amax_peer[2][kBlockM];
    alignas(8) std::uint64_t amax_bar[2];
    // Linear-1 completion, handed from the consumers to the releaser warp (moe_fused_handoff.cuh).
    MoeL1Handoff l1_handoff;
  };
};
using MoeFusedTraits = MoeFusedTraitsT<false>;
static_assert(sizeof(MoeFusedTraitsT<false>::SharedStorage) == sizeof(MoeFusedTraitsT<true>::SharedStorage),
              "both precisions use the same shared memory (one grid size)");
static_assert(MoeFusedTraitsT<false>::kStageBytes == MoeFusedTraitsT<true>::kStageBytes);

// TMA descriptors of one launch (kernel parameters, __grid_constant__).
template <class T>
struct MoeFusedTmaT {
  typename T::TmaA recv;      // [recv_rows][hidden], multicast within the CTA pair
  typename T::TmaBHalf w1;    // [el·2·h_inter][hidden]
  typename T::TmaA h;         // [recv_rows][h_inter], multicast within the CTA pair
  typename T::TmaB w2;        // [el·hidden][h_inter]
  int32_t recv_rows, hidden, h_inter, w1_rows, w2_rows;
};

template <class T>
inline MoeFusedTmaT<T> make_moe_fused_tma(const MoeFusedArguments& a) {
  using namespace cute;
  using E = typename T::Element;
  const int el = a.experts / a.ranks;
  MoeFusedTmaT<T> t{};
  t.recv_rows = int32_t(a.recv_rows);
  t.hidden = a.hidden;
  t.h_inter = a.h_inter;
  t.w1_rows = el * 2 * a.h_inter;
  t.w2_rows = el * a.hidden;
  auto g = [](const void* ptr, int rows, int cols) {
    return make_tensor(make_gmem_ptr(static_cast<E const*>(ptr)), typename T::GShape{rows, cols},
                       typename T::GStride{int64_t(cols), _1{}});
  };
  using LA = typename T::SmemLayoutAStage;
  using LB = typename T::SmemLayoutBStage;
  using LBH = typename T::SmemLayoutBHalf;
  constexpr Int<T::kClusterSize> cluster{};
  t.recv =
      make_tma_copy(SM90_TMA_LOAD_MULTICAST{}, g(a.recv, t.recv_rows, a.hidden), LA{}, typename T::TileA{}, cluster);
  t.w1 = make_tma_copy(SM90_TMA_LOAD{}, g(a.w1, t.w1_rows, a.hidden), LBH{}, typename T::TileBHalf{}, _1{});
  t.h = make_tma_copy(SM90_TMA_LOAD_MULTICAST{}, g(a.h, t.recv_rows, a.h_inter), LA{}, typename T::TileA{}, cluster);
  t.w2 = make_tma_copy(SM90_TMA_LOAD{}, g(a.w2, t.w2_rows, a.h_inter), LB{}, typename T::TileB{}, _1{});
  return t;
}

// The first MMA thread of the calling consumer warpgroup (0 or 128), warp-uniform: the warpgroup index
// comes from a shuffle of lane 0's (cutlass::canonical_warp_group_idx), which the compiler knows to be
// the same in every lane. Consumer warpgroups are groups 1 and 2 of the block.
__device__ __forceinline__ int moe_mma_wg_thread() {
  return (cutlass::canonical_warp_group_idx() - 1) * cutlass::NumThreadsPerWarpGroup;
}

template <class Pipeline, class State>
__device__ __forceinline__ void moe_producer_acquire(Pipeline& pipe, State const& s, MoeFusedKernelParams const& p) {
  moe_wait_stage([&] { return pipe.producer_try_acquire(s); }, [&](auto token) { pipe.producer_acquire(s, token); }, s,
                 p, kMoeWaitStageFree);
}

template <class Pipeline, class State>
__device__ __forceinline__ void moe_consumer_wait(Pipeline& pipe, State const& s, MoeFusedKernelParams const& p) {
  moe_wait_stage([&] { return pipe.consumer_try_wait(s); }, [&](auto token) { pipe.consumer_wait(s, token); }, s, p,
                 kMoeWaitStageFull);
}

// Producer (one warp; lane 0 issues): the k-loop loads of one tile: this CTA's half of A (multicast to
// both CTAs of the pair) and its own B. Dependencies are awaited by the caller before this is called.
template <class T, class State>
__device__ __forceinline__ void moe_load_tile(MoeFusedTmaT<T> const& t, typename T::SharedStorage& smem,
                                              typename T::Pipeline& pipe, State& write, sched::MoeTile const& tile,
                                              MoeFusedKernelParams const& p) {
  using namespace cute;
  const bool issuer = cute::elect_one_sync();
  const int cta = int(cute::block_rank_in_cluster());
  constexpr std::uint16_t kPairMask = (1u << T::kClusterSize) - 1;
  Tensor sA = make_tensor(make_smem_ptr(smem.a.data()), typename T::SmemLayoutA{});
  if (tile.stage == sched::MoeStage::kLinear1) {
    Tensor mA = t.recv.get_tma_tensor(make_shape(t.recv_rows, t.hidden));
    Tensor gA = local_tile(mA, typename T::TileA{}, make_coord(tile.row, _));  // (BM, BK, k)
    auto [tAg, tAs] = tma_partition(t.recv, cta, Layout<Int<T::kClusterSize>>{}, group_modes<0, 2>(sA),
                                    group_modes<0, 2>(gA));
    Tensor mB = t.w1.get_tma_tensor(make_shape(t.w1_rows, t.hidden));
    // 64-row tile indices of this expert's gate rows n·64 and up rows h_inter + n·64.
    const int gate_tile = tile.expert * (2 * t.h_inter / 64) + tile.n;
    const int up_tile = gate_tile + t.h_inter / 64;
    Tensor gBg = local_tile(mB, typename T::TileBHalf{}, make_coord(gate_tile, _));
    Tensor gBu = local_tile(mB, typename T::TileBHalf{}, make_coord(up_tile, _));
    const int k_tiles = t.hidden / T::kBlockK;
    for (int k = 0; k < k_tiles; ++k) {
      moe_producer_acquire(pipe, write, p);
      const int s = write.index();
      auto* bar = pipe.producer_get_barrier(write);
      Tensor sBg = make_tensor(make_smem_ptr(smem.b.data() + s * T::kBlockN * T::kBlockK), typename T::SmemLayoutBHalf{});
      Tensor sBu = make_tensor(make_smem_ptr(smem.b.data() + s * T::kBlockN * T::kBlockK + (T::kBlockN / 2) * T::kBlockK),
                               typename T::SmemLayoutBHalf{});
      auto [tBgg, tBsg] = tma_partition(t.w1, _0{}, Layout<_1>{}, group_modes<0, 2>(sBg), group_modes<0, 2>(gBg));
      auto [tBgu, tBsu] = tma_partition(t.w1, _0{}, Layout<_1>{}, group_modes<0, 2>(sBu), group_modes<0, 2>(gBu));
      if (issuer) {
        copy(t.recv.with(*bar, kPairMask), tAg(_, k), tAs(_, s));
        copy(t.w1.with(*bar), tBgg(_, k), tBsg);
        copy(t.w1.with(*bar), tBgu(_, k), tBsu);
      }
      ++write;
    }
  } else {
    Tensor mA = t.h.get_tma_tensor(make_shape(t.recv_rows, t.h_inter));
    Tensor gA = local_tile(mA, typename T::TileA{}, make_coord(tile.row, _));
    auto [tAg, tAs] = tma_partition(t.h, cta, Layout<Int<T::kClusterSize>>{}, group_modes<0, 2>(sA),
                                    group_modes<0, 2>(gA));
    Tensor sB = make_tensor(make_smem_ptr(smem.b.data()), typename T::SmemLayoutB{});
    Tensor mB = t.w2.get_tma_tensor(make_shape(t.w2_rows, t.h_inter));
    Tensor gB = local_tile(mB, typename T::TileB{}, make_coord(tile.expert * (t.hidden / T::kBlockN) + tile.n, _));
    auto [tBg, tBs] = tma_partition(t.w2, _0{}, Layout<_1>{}, group_modes<0, 2>(sB), group_modes<0, 2>(gB));
    const int k_tiles = t.h_inter / T::kBlockK;
    for (int k = 0; k < k_tiles; ++k) {
      moe_producer_acquire(pipe, write, p);
      const int s = write.index();
      auto* bar = pipe.producer_get_barrier(write);
      if (issuer) {
        copy(t.h.with(*bar, kPairMask), tAg(_, k), tAs(_, s));
        copy(t.w2.with(*bar), tBg(_, k), tBs(_, s));
      }
      ++write;
    }
  }
}

// Consumer: acc = A · B^T over k_tiles k-steps (both warpgroups; each owns 64 rows). `issue()` runs once
// per k-step while its GMMAs are in flight (the piggybacked Combine stores of the previous Linear-2 tile).
// t_first_stage (traced builds): %globaltimer when the first k-step's operands are ready.
// mma_wg_thread: the first MMA thread of the calling warpgroup (0 or 128), a warp-uniform value (from
// moe_mma_wg_thread()): the GMMA descriptors depend only on the warpgroup, and computed from a uniform
// index they stay in uniform registers (a per-thread index costs each k-step a chain of vector adds and
// register-to-uniform moves before its first GMMA).
template <class T, class State, class Acc, class Issue>
__device__ __forceinline__ void moe_mma_tile(typename T::SharedStorage& smem, typename T::Pipeline& pipe, State& read,
                                             Acc& acc, int k_tiles, int mma_wg_thread, MoeFusedKernelParams const& p,
                                             Issue&& issue, std::uint64_t* t_first_stage = nullptr) {
  using namespace cute;
  typename T::TiledMma mma;
  Tensor sA = make_tensor(make_smem_ptr(smem.a.data()), typename T::SmemLayoutA{});
  Tensor sB = make_tensor(make_smem_ptr(smem.b.data()), typename T::SmemLayoutB{});
  auto thr = mma.get_thread_slice(mma_wg_thread);
  Tensor tCrA = thr.partition_fragment_A(sA);  // (MMA, MMA_M, MMA_K, stages)
  Tensor tCrB = thr.partition_fragment_B(sB);
  State release = read;
  for (int k = 0; k < k_tiles; ++k) {
    moe_consumer_wait(pipe, read, p);
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
    issue();
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

// Consumer, a tile this CTA does not compute (the padding N-tile of an odd Linear-2 tile count): the
// partner CTA still needs this CTA's multicast half of A, so the producer loads the tile as usual and the
// consumers only wait for each stage and release it, keeping both CTAs' pipelines in step.
// The warpgroup meets at a named barrier between each stage's wait and its release. The pipeline counts one
// release per warpgroup and destination CTA (CUTLASS's spread arrivals: two of the warpgroup's four warps
// signal, one to each CTA of the pair; the others' release is a no-op), and in a computed tile the
// warpgroup-wide GMMA keeps the four warps within one k-step of each other. Here no GMMA does, so without
// the barrier a signalling warp could release stages that its sibling warps had not yet waited for; once
// a stage has been refilled twice past a sibling's wait, the phase parity it waits on names a later,
// unfilled phase, and the kernel hangs (docs/moe_notes.md, "Fused kernel structure").
template <class T, class State>
__device__ __forceinline__ void moe_drain_tile(typename T::Pipeline& pipe, State& read, int k_tiles, int mma_wg_thread,
                                               MoeFusedKernelParams const& p) {
  const int wg = mma_wg_thread / cutlass::NumThreadsPerWarpGroup;
  for (int k = 0; k < k_tiles; ++k) {
    moe_consumer_wait(pipe, read, p);
    gpu::named_barrier_sync(cutlass::NumThreadsPerWarpGroup, MoeNamedBarrier::kWarpgroup0, wg);
    pipe.consumer_release(read);
    ++read;
  }
}

// Scales of one FP8 tile as seen by one consumer thread: the activation scales of its two accumulator
// rows (r0 and r0 + 8: a0, a1, indexed by k-step·kGroups + group) and the weight block scales of its
// accumulator columns below and above the tile's middle (b_lo, b_hi, indexed by k-step; Linear-1: the
// gate and the up block, Linear-2: the same block twice). a0/a1 are written during the kernel (by the
// peers' dispatch or the SwiGLU epilogue) and read with weak L1-cached loads (ld_after_acquire_f32);
// b_lo/b_hi are weights.
struct MoeFp8TileScales {
  const float* a0;
  const float* a1;
  const float* b_lo;
  const float* b_hi;
};

// Consumer, FP8: total = Σ_k Σ_g s_a(row, k·G + g) · s_b(col, k) · (A · B^T over the g-th K/G slice of
// k-step k). Each slice's GMMAs run into a scratch accumulator (zeroed by its first GMMA), which is
// then promoted into `total` in FP32. A k-step's activation scales are loaded once its operands have
// arrived (that wait is what orders them after the inputs' producers) and before its GMMAs are issued,
// so their latency hides behind the GMMAs. `issue()` runs once per k-step while its first GMMAs are in
// flight (as in moe_mma_tile). The operand setup repeats moe_mma_tile's on purpose: each mainloop builds
// its own fragments, so neither one's register allocation depends on a helper shared with the other
// (docs/moe_notes.md, "Fused kernel structure").
template <class T, int kGroups, class State, class Acc, class Issue>
__device__ __forceinline__ void moe_mma_tile_fp8(typename T::SharedStorage& smem, typename T::Pipeline& pipe,
                                                 State& read, Acc& total, int k_tiles, int mma_wg_thread,
                                                 MoeFp8TileScales const& sc, MoeFusedKernelParams const& p,
                                                 Issue&& issue, std::uint64_t* t_first_stage = nullptr) {
  using namespace cute;
  static_assert(T::kFp8, "the promoted mainloop is the FP8 one");
  typename T::TiledMma mma;
  Tensor sA = make_tensor(make_smem_ptr(smem.a.data()), typename T::SmemLayoutA{});
  Tensor sB = make_tensor(make_smem_ptr(smem.b.data()), typename T::SmemLayoutB{});
  auto thr = mma.get_thread_slice(mma_wg_thread);
  Tensor tCrA = thr.partition_fragment_A(sA);  // (MMA, MMA_M, MMA_K, stages)
  Tensor tCrB = thr.partition_fragment_B(sB);
  Tensor acc = make_fragment_like(total);
  constexpr int kSteps = decltype(size<2>(tCrA))::value;  // GMMAs per k-step
  static_assert(kSteps % kGroups == 0, "whole GMMAs per scale group");
  constexpr int kSize = decltype(size(total))::value;
  clear(total);
  for (int k = 0; k < k_tiles; ++k) {
    const float b_lo = __ldg(sc.b_lo + k), b_hi = __ldg(sc.b_hi + k);
    moe_consumer_wait(pipe, read, p);
#if defined(XSTAGE_MOE_FUSED_TRACE)
    if (k == 0 && t_first_stage != nullptr) *t_first_stage = gpu::globaltimer_ns();
#endif
    // Activation scales only now: the full barrier orders them after the producer's acquire of the
    // tile's inputs (read earlier, they may predate the peer's or the SwiGLU epilogue's writes).
    float a0[kGroups], a1[kGroups];
    CUTE_UNROLL
    for (int g = 0; g < kGroups; ++g) {
      a0[g] = gpu::ld_after_acquire_f32(sc.a0 + k * kGroups + g);
      a1[g] = gpu::ld_after_acquire_f32(sc.a1 + k * kGroups + g);
    }
    const int s = read.index();
    CUTE_UNROLL
    for (int g = 0; g < kGroups; ++g) {
      warpgroup_fence_operand(acc);
      warpgroup_arrive();
      mma.accumulate_ = GMMA::ScaleOut::Zero;
      CUTE_UNROLL
      for (int kk = g * (kSteps / kGroups); kk < (g + 1) * (kSteps / kGroups); ++kk) {
        gemm(mma, tCrA(_, _, kk, s), tCrB(_, _, kk, s), acc);
        mma.accumulate_ = GMMA::ScaleOut::One;
      }
      warpgroup_commit_batch();
      if (g == 0) issue();
      warpgroup_wait<0>();
      warpgroup_fence_operand(acc);
      if (g == kGroups - 1) pipe.consumer_release(read);  // the stage's operands are no longer read
      // Value i sits in row set (i / 2) % 2 (r0 or r0 + 8) and column half i / (kSize / 2).
      const float f[4] = {a0[g] * b_lo, a0[g] * b_hi, a1[g] * b_lo, a1[g] * b_hi};
      CUTE_UNROLL
      for (int i = 0; i < kSize; ++i) total(i) += acc(i) * f[2 * ((i / 2) % 2) + (i / (kSize / 2))];
    }
    ++read;
  }
}

}  // namespace xstage::moe
