// Mainloop of the attention forward kernel: the producer side (TMA loads of Q, K, V into pipelined
// shared memory) and the consumer side (S = Q K^T, online softmax, O += P V on GMMA).
//
// Consumer schedule per tile (intra-warpgroup overlap): key blocks run from last to first so that the
// only partial block (ragged sequence end) is the first one and the steady-state loop needs no mask.
// In the loop, S_j = Q K_j^T and O += P_{j+1} V_{j+1} are issued back to back; softmax of S_j runs
// while the tensor cores still work on P V. With Traits::kQInRegs (bf16, sched::AttnTileConfig::q_in_regs)
// each warpgroup copies its Q rows into registers at the start of the tile and releases Q's stage there, so
// that S reads only K from shared memory and the next tile's Q loads under this one.
//
// FP8 (Traits::kFp8): the operands are the pre-pass's s8 Q and K and e4m3 V^T (attn_fp8_quant.hpp); the
// int32 scores become floats in place (one IADD each, attn_fp8_quant.hpp), each key block's scores are
// scaled by the rows' Q scales and the block's K scale inside the softmax (OnlineSoftmax kBlockScaled),
// P is packed to e4m3 in place (acc_to_fp8_operand_a) and the V channel scales are applied once per tile
// to the normalized output (apply_v_scale).
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/pipeline/sm90_pipeline.hpp>

#include "attn_fragment.cuh"
#include "attn_kernel_traits.cuh"
#include "attn_named_barriers.cuh"
#include "attn_softmax.cuh"
#include "attn_wait.cuh"

namespace xstage::attn {

template <class Traits>
struct AttnMainloop {
  using Element = typename Traits::ElementMma;  // V's operand type in shared memory
  using ElementQK = typename Traits::ElementQK;  // Q's and K's
  static constexpr bool kFp8 = Traits::kFp8;  // P and V in e4m3 (V^T); else bf16, V as stored
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kHeadDim = Traits::kHeadDim;
  using BlockM = typename Traits::BlockM;
  using BlockN = typename Traits::BlockN;
  using HeadDimT = typename Traits::HeadDimT;
  using PipelineQ = typename Traits::PipelineQ;
  using PipelineKV = typename Traits::PipelineKV;
  using Storage = typename Traits::MainloopStorage;

  // Global tensors as (seq, dim, head, batch); V is read as V^T: (dim, seq, head, batch), contiguous
  // along dim (bf16: V as stored) or along seq (FP8: the pre-pass's V^T).
  using ShapeT = cute::Shape<int32_t, int32_t, int32_t, int32_t>;
  using StrideT = cute::Stride<int64_t, cute::_1, int64_t, int64_t>;
  using StrideVtT = std::conditional_t<kFp8, cute::Stride<int64_t, cute::_1, int64_t, int64_t>,
                                       cute::Stride<cute::_1, int64_t, int64_t, int64_t>>;

  using TmaQ = decltype(cute::make_tma_copy(
      cute::SM90_TMA_LOAD{},
      cute::make_tensor(cute::make_gmem_ptr(static_cast<ElementQK const*>(nullptr)), ShapeT{}, StrideT{}),
      typename Traits::SmemLayoutQ{}, cute::Shape<BlockM, HeadDimT>{}, cute::_1{}));
  // K and V: multicast within the cluster (Traits::kClusterM > 1), each CTA copying 1 / kClusterM of the
  // block along its first mode (K's rows, V^T's head-dim rows).
  static constexpr int kClusterM = Traits::kClusterM;
  using ClusterM = cute::Int<kClusterM>;
  using TmaLoadKV = std::conditional_t<(kClusterM > 1), cute::SM90_TMA_LOAD_MULTICAST, cute::SM90_TMA_LOAD>;
  using TmaK = decltype(cute::make_tma_copy(
      TmaLoadKV{},
      cute::make_tensor(cute::make_gmem_ptr(static_cast<ElementQK const*>(nullptr)), ShapeT{}, StrideT{}),
      cute::take<0, 2>(typename Traits::SmemLayoutK{}), cute::Shape<BlockN, HeadDimT>{}, ClusterM{}));
  using TmaV = decltype(cute::make_tma_copy(
      TmaLoadKV{},
      cute::make_tensor(cute::make_gmem_ptr(static_cast<Element const*>(nullptr)), ShapeT{}, StrideVtT{}),
      cute::take<0, 2>(typename Traits::SmemLayoutVt{}), cute::Shape<HeadDimT, BlockN>{}, ClusterM{}));

  struct Params {
    TmaQ tma_q;
    TmaK tma_k;
    TmaV tma_v;
    ShapeT shape_q;   // (seq_q, d, heads, batch)
    ShapeT shape_k;   // (seq_k, d, heads, batch)
    ShapeT shape_vt;  // (d, seq_k, heads, batch)
    int seq_k;
    float softmax_scale;
    float scale_log2;
    // FP8 only: the pre-pass's scales (attn_fp8_quant.hpp) and their per-(batch, head) counts.
    float const* q_scale;
    float const* k_scale;
    float const* v_scale;
    float const* q_dot_kmean;
    int q_rows;
    int k_blocks;
  };

  struct Arguments {
    ElementQK const* q;
    ElementQK const* k;
    Element const* v;
    int batch, seq_q, seq_k, heads;
    int64_t q_stride_batch, q_stride_seq, q_stride_head;  // in elements; the head-dim stride is 1
    int64_t k_stride_batch, k_stride_seq, k_stride_head;
    int64_t v_stride_batch, v_stride_seq, v_stride_head;  // FP8: V^T's strides, v_stride_seq its dim stride
    float softmax_scale;
    // FP8 only (v is V^T [B, H, D, vt_keys]; vt_keys its key extent, the padded keys).
    float const* q_scale = nullptr;
    float const* k_scale = nullptr;
    float const* v_scale = nullptr;
    float const* q_dot_kmean = nullptr;
    int q_rows = 0;
    int k_blocks = 0;
    int vt_keys = 0;
  };

  static Params to_params(Arguments const& a) {
    using namespace cute;
    const ShapeT shape_q{a.seq_q, kHeadDim, a.heads, a.batch};
    const ShapeT shape_k{a.seq_k, kHeadDim, a.heads, a.batch};
    const ShapeT shape_vt{kHeadDim, kFp8 ? a.vt_keys : a.seq_k, a.heads, a.batch};
    auto mQ = make_tensor(make_gmem_ptr(a.q), shape_q, StrideT{a.q_stride_seq, _1{}, a.q_stride_head, a.q_stride_batch});
    auto mK = make_tensor(make_gmem_ptr(a.k), shape_k, StrideT{a.k_stride_seq, _1{}, a.k_stride_head, a.k_stride_batch});
    auto mVt = [&] {
      if constexpr (kFp8) {
        return make_tensor(make_gmem_ptr(a.v), shape_vt,
                           StrideVtT{a.v_stride_seq, _1{}, a.v_stride_head, a.v_stride_batch});
      } else {
        return make_tensor(make_gmem_ptr(a.v), shape_vt,
                           StrideVtT{_1{}, a.v_stride_seq, a.v_stride_head, a.v_stride_batch});
      }
    }();
    Params p{
        make_tma_copy(SM90_TMA_LOAD{}, mQ, typename Traits::SmemLayoutQ{}, Shape<BlockM, HeadDimT>{}, _1{}),
        make_tma_copy(TmaLoadKV{}, mK, take<0, 2>(typename Traits::SmemLayoutK{}), Shape<BlockN, HeadDimT>{},
                      ClusterM{}),
        make_tma_copy(TmaLoadKV{}, mVt, take<0, 2>(typename Traits::SmemLayoutVt{}), Shape<HeadDimT, BlockN>{},
                      ClusterM{}),
        shape_q,
        shape_k,
        shape_vt,
        a.seq_k,
        a.softmax_scale,
        a.softmax_scale * 1.4426950408889634f,
        a.q_scale,
        a.k_scale,
        a.v_scale,
        a.q_dot_kmean,
        a.q_rows,
        a.k_blocks};
    return p;
  }

  static CUTE_DEVICE void prefetch_descriptors(Params const& p) {
    cute::prefetch_tma_descriptor(p.tma_q.get_tma_descriptor());
    cute::prefetch_tma_descriptor(p.tma_k.get_tma_descriptor());
    cute::prefetch_tma_descriptor(p.tma_v.get_tma_descriptor());
  }

  // kAllKeys (load and mma): the whole tile, key blocks [0, ceil(seq_k / kBlockN)); the range arguments
  // are then ignored. The bounds are written `kAllKeys ? 0 : kb_begin` where they are used, so with
  // kAllKeys the lower bound is the constant 0 from the front end on and the whole-tile kernel compiles to
  // exactly the code it had before split segments existed. A 0 that reaches the consumer's loop only by
  // propagation (passed in as an argument) gave that loop different code (docs/attn_notes.md, round 9).

  // Producer: called by all 32 lanes of the producer warp; lane 0 issues the copies of the tile's Q and
  // of key blocks [kb_begin, kb_end).
  template <bool kAllKeys, class StateQ, class StateKV>
  static CUTE_DEVICE void load(Params const& p, Storage& storage, PipelineQ& pipe_q, PipelineKV& pipe_k,
                               PipelineKV& pipe_v, StateQ& q_write, StateKV& k_write, StateKV& v_write, int m_block,
                               int head, int batch, int kb_begin = 0, int kb_end = 0) {
    using namespace cute;
    Tensor sQ = make_tensor(make_smem_ptr(storage.smem_q.data()), typename Traits::SmemLayoutQ{});
    Tensor sK = make_tensor(make_smem_ptr(storage.smem_k.data()), typename Traits::SmemLayoutK{});
    Tensor sVt = make_tensor(make_smem_ptr(storage.smem_v.data()), typename Traits::SmemLayoutVt{});

    Tensor mQ = p.tma_q.get_tma_tensor(p.shape_q);
    Tensor mK = p.tma_k.get_tma_tensor(p.shape_k);
    Tensor mVt = p.tma_v.get_tma_tensor(p.shape_vt);
    Tensor gQ = local_tile(mQ(_, _, head, batch), Shape<BlockM, HeadDimT>{}, make_coord(m_block, _0{}));  // (M, D)
    Tensor gK = local_tile(mK(_, _, head, batch), Shape<BlockN, HeadDimT>{}, make_coord(_, _0{}));  // (N, D, nblk)
    Tensor gVt = local_tile(mVt(_, _, head, batch), Shape<HeadDimT, BlockN>{}, make_coord(_0{}, _));  // (D, N, nblk)

    auto [tQgQ, tQsQ] = tma_partition(p.tma_q, _0{}, Layout<_1>{}, group_modes<0, 2>(sQ), group_modes<0, 2>(gQ));
    // This CTA's share of the K and V blocks (all of them without a cluster).
    const auto cta_in_cluster = [] {
      if constexpr (kClusterM > 1) {
        return int(cute::block_rank_in_cluster());
      } else {
        return _0{};
      }
    }();
    auto [tKgK, tKsK] = tma_partition(p.tma_k, cta_in_cluster, Layout<ClusterM>{}, group_modes<0, 2>(sK),
                                      group_modes<0, 2>(gK));
    auto [tVgV, tVsV] = tma_partition(p.tma_v, cta_in_cluster, Layout<ClusterM>{}, group_modes<0, 2>(sVt),
                                      group_modes<0, 2>(gVt));
    // The K or V copy of this CTA's share (bytes: the whole block's) into a stage of every CTA of the cluster.
    auto kv_copy = [](auto const& tma, auto* barrier, auto const& src, auto&& dst) {
      if constexpr (kClusterM > 1) {
        copy(tma.with(*barrier, uint16_t((1u << kClusterM) - 1)), src, dst);
      } else {
        copy(tma.with(*barrier), src, dst);
      }
    };

    const bool issuer = cute::elect_one_sync();
    const int kb_lo = kAllKeys ? 0 : kb_begin;
    const int kb_hi = kAllKeys ? (p.seq_k + kBlockN - 1) / kBlockN : kb_end;

    attn_producer_acquire(pipe_q, q_write, kAttnWaitProducerQ);
    if (issuer) copy(p.tma_q.with(*pipe_q.producer_get_barrier(q_write)), tQgQ, tQsQ);
    ++q_write;

    // Same order as the consumer: key blocks kb_hi - 1 down to kb_lo; K_j before V_j.
    for (int n_block = kb_hi - 1; n_block >= kb_lo; --n_block) {
      attn_producer_acquire(pipe_k, k_write, kAttnWaitProducerK);
      if (issuer) {
        kv_copy(p.tma_k, pipe_k.producer_get_barrier(k_write), tKgK(_, n_block), tKsK(_, k_write.index()));
      }
      ++k_write;
      attn_producer_acquire(pipe_v, v_write, kAttnWaitProducerV);
      if (issuer) {
        kv_copy(p.tma_v, pipe_v.producer_get_barrier(v_write), tVgV(_, n_block), tVsV(_, v_write.index()));
      }
      ++v_write;
    }
  }

  // Consumer: one tile's key blocks [kb_begin, kb_end) (all of them, or a split tail segment,
  // sched::AttnTileScheduler): the unnormalized output in acc_o, the rows' max and sum in softmax.
  template <bool kAllKeys, class StateQ, class StateKV, class TensorO, class Softmax>
  static CUTE_DEVICE void mma(Params const& p, Storage& storage, PipelineQ& pipe_q, PipelineKV& pipe_k,
                              PipelineKV& pipe_v, StateQ& q_read, StateKV& k_read, StateKV& v_read, TensorO& acc_o,
                              Softmax& softmax, int mma_thread_idx, int m_block, int head, int batch,
                              int kb_begin = 0, int kb_end = 0) {
    using namespace cute;
    Tensor sQ = make_tensor(make_smem_ptr(storage.smem_q.data()), typename Traits::SmemLayoutQ{});
    Tensor sK = make_tensor(make_smem_ptr(storage.smem_k.data()), typename Traits::SmemLayoutK{});
    Tensor sVt = make_tensor(make_smem_ptr(storage.smem_v.data()), typename Traits::SmemLayoutVt{});

    typename Traits::TiledMmaQK mma_qk;
    typename Traits::TiledMmaPV mma_pv;
    auto thr_qk = mma_qk.get_thread_slice(mma_thread_idx);
    auto thr_pv = mma_pv.get_thread_slice(mma_thread_idx);
    Tensor tSrQ = thr_qk.partition_fragment_A(sQ);   // (MMA, MMA_M, MMA_K) descriptors, or kQInRegs registers
    Tensor tSrK = thr_qk.partition_fragment_B(sK);   // (MMA, MMA_N, MMA_K, stage)
    Tensor tOrV = thr_pv.partition_fragment_B(sVt);  // (MMA, MMA_N, MMA_K, stage)

    const int kb_lo = kAllKeys ? 0 : kb_begin;
    const int kb_hi = kAllKeys ? (p.seq_k + kBlockN - 1) / kBlockN : kb_end;

    // GEMM issue turns between the consumer warpgroups: each issue section waits for its own turn and
    // hands the turn to the next warpgroup (round robin over two or three), so the tensor cores take them
    // in turn and the others' softmax runs while one's GEMMs execute. Every warpgroup runs the same number
    // of sections per tile, so the order never drifts.
    const int wg = mma_thread_idx / 128;
    constexpr int kWgs = Traits::kNumMmaWarpGroups;
    auto turn_wait = [&] {
      if constexpr (Traits::kWgGemmOrder) {
        gpu::named_barrier_sync(2 * 128, AttnNamedBarrier::kWgOrder0, wg);
      }
    };
    auto turn_pass = [&] {
      if constexpr (Traits::kWgGemmOrder) {
        if constexpr (kWgs == 2) {
          gpu::named_barrier_arrive(2 * 128, AttnNamedBarrier::kWgOrder0, (wg ^ 1));
        } else {
          gpu::named_barrier_arrive(2 * 128, AttnNamedBarrier::kWgOrder0, wg + 1 == kWgs ? 0 : wg + 1);
        }
      }
    };

    // S as the GMMA writes it (int32 for s8 Q, K) and as the softmax reads it (float, in place).
    Tensor acc_s_raw = partition_fragment_C(mma_qk, Shape<BlockM, BlockN>{});
    Tensor acc_s = [&] {
      if constexpr (kFp8) {
        return recast<float>(acc_s_raw);
      } else {
        return make_tensor(acc_s_raw.data(), acc_s_raw.layout());
      }
    }();
    auto scores_to_float = [&] {
      if constexpr (kFp8) {
        CUTE_UNROLL
        for (int i = 0; i < size(acc_s_raw); ++i) acc_s(i) = __int_as_float(acc_s_raw(i) + kFp8QkIntBiasBits);
      }
    };
    // P in the register layout of the P V A operand. bf16: the same element order as acc_s. FP8: the
    // e4m3 atom's order, V^T's keys permuted to match (acc_to_fp8_operand_a).
    Tensor frag_p = [&] {
      if constexpr (kFp8) {
        return make_tensor<Element>(fp8_operand_a_layout<kBlockN>());
      } else {
        return make_tensor<Element>(acc_to_operand_a_layout(acc_s.layout()));
      }
    }();
    auto convert_p = [&](auto const& s) {
      if constexpr (kFp8) {
        acc_to_fp8_operand_a(s, frag_p);
      } else {
        Tensor p_as_s = make_tensor(frag_p.data(), s.layout());
        CUTE_UNROLL
        for (int i = 0; i < size(s); ++i) p_as_s(i) = Element(s(i));
      }
    };
    // FP8: row r's scores in key block j are s_raw x (softmax scale x log2 e x q_scale[r] x k_scale[j]).
    using RowScales = cute::array<float, Softmax::kNumRows>;
    [[maybe_unused]] RowScales q_scale_log2{};
    [[maybe_unused]] float const* k_scale = nullptr;
    if constexpr (kFp8) {
      const int64_t bh = int64_t(batch) * get<2>(p.shape_q) + head;
      Tensor tScS = thr_qk.partition_C(make_identity_tensor(Shape<BlockM, BlockN>{}));
      Tensor rows = make_tensor(tScS.data(), acc_rowcol_layout(tScS.layout()));
      CUTE_UNROLL
      for (int r = 0; r < Softmax::kNumRows; ++r) {
        q_scale_log2[r] = p.scale_log2 * p.q_scale[bh * p.q_rows + m_block * kBlockM + get<0>(rows(r, 0))];
      }
      k_scale = p.k_scale + bh * p.k_blocks;
    }
    auto block_scale_log2 = [&](int n_block) {
      RowScales c{};
      if constexpr (kFp8) {
        const float ks = __ldg(k_scale + n_block);
        CUTE_UNROLL
        for (int r = 0; r < Softmax::kNumRows; ++r) c[r] = q_scale_log2[r] * ks;
      }
      return c;
    };

    // First key block: the tile's last, possibly partial, when the range reaches the end of the keys.
    attn_consumer_wait(pipe_q, q_read, kAttnWaitConsumerQ);
    if constexpr (Traits::kQInRegs) {
      // Q into registers (ldmatrix through the swizzle), then its stage is free for the next tile's Q: the
      // proxy fence orders these generic-proxy reads before the TMA's writes that the release allows.
      auto copy_q = make_tiled_copy_A(Copy_Atom<SM75_U32x4_LDSM_N, ElementQK>{}, mma_qk);
      auto thr_copy_q = copy_q.get_thread_slice(mma_thread_idx);
      copy(copy_q, thr_copy_q.partition_S(sQ), thr_copy_q.retile_D(tSrQ));
      cutlass::arch::fence_view_async_shared();
      pipe_q.consumer_release(q_read);
      ++q_read;
    }
    attn_consumer_wait(pipe_k, k_read, kAttnWaitConsumerK);
    turn_wait();
    wgmma_issue<Traits::kQInRegs>(mma_qk, tSrQ, tSrK(_, _, _, k_read.index()), acc_s_raw, /*zero_init=*/true);
    turn_pass();
    warpgroup_wait<0>();
    pipe_k.consumer_release(k_read);
    ++k_read;
    scores_to_float();
    {
      const int valid_cols = p.seq_k - (kb_hi - 1) * kBlockN;
      if (valid_cols < kBlockN) {
        Tensor cS = make_identity_tensor(Shape<BlockM, BlockN>{});
        Tensor tScS = thr_qk.partition_C(cS);
        CUTE_UNROLL
        for (int i = 0; i < size(acc_s); ++i) {
          if (get<1>(tScS(i)) >= valid_cols) acc_s(i) = -INFINITY;
        }
      }
    }
    softmax.template step<true>(acc_s, block_scale_log2(kb_hi - 1));
    convert_p(acc_s);

    bool first_pv = true;
    // bf16: the next K and V stages are polled (test_wait, which never blocks) after this block's
    // exponentials, so that the loop's top skips its own poll when they have already landed: that poll's
    // latency (the K barrier wait was 4.5 % of the consumer warps' time, docs/attn_notes.md round 6) sat on
    // the critical path between the softmax and the next S GEMM (+3-4 %, round 7). Not FP8: its softmax is
    // issue-bound, and the two polls cost it up to 2 % (FP8 tokens stay WaitAgain; the waits below then
    // poll as before).
    cutlass::ConsumerToken k_polled{cutlass::BarrierStatus::WaitAgain};
    cutlass::ConsumerToken v_polled{cutlass::BarrierStatus::WaitAgain};
    CUTE_NO_UNROLL
    for (int n_block = kb_hi - 2; n_block >= kb_lo; --n_block) {
      [[maybe_unused]] const RowScales c_j = block_scale_log2(n_block);  // FP8: loaded under the GEMMs
      attn_consumer_wait(pipe_k, k_read, kAttnWaitConsumerK, k_polled);
      turn_wait();
      wgmma_issue<Traits::kQInRegs>(mma_qk, tSrQ, tSrK(_, _, _, k_read.index()), acc_s_raw, /*zero_init=*/true);
      attn_consumer_wait(pipe_v, v_read, kAttnWaitConsumerV, v_polled);
      wgmma_issue<true>(mma_pv, frag_p, tOrV(_, _, _, v_read.index()), acc_o, first_pv);
      turn_pass();
      first_pv = false;
      warpgroup_wait<1>();  // S of this block is ready; P V of the previous block may still run
      pipe_k.consumer_release(k_read);
      ++k_read;
      scores_to_float();
      auto rescale = softmax.template step<false>(acc_s, c_j);
      if constexpr (!kFp8) k_polled = pipe_k.consumer_test_wait(k_read);  // next block's K (next tile's: unused)
      warpgroup_wait<0>();  // P V done: its V stage and the P registers are free
      pipe_v.consumer_release(v_read);
      ++v_read;
      if constexpr (!kFp8) v_polled = pipe_v.consumer_test_wait(v_read);
      // P first: its packs then share a basic block with the exponentials above and interleave with
      // them; the rescale below is a branch (skipped by warps whose rows kept their max).
      convert_p(acc_s);
      softmax.rescale_output(acc_o, rescale);
    }
    // All S products of this tile are done: the producer may load the next tile's Q (with Q in registers its
    // stage was released at the start of the tile).
    if constexpr (!Traits::kQInRegs) {
      pipe_q.consumer_release(q_read);
      ++q_read;
    }

    attn_consumer_wait(pipe_v, v_read, kAttnWaitConsumerV);
    turn_wait();
    wgmma_issue<true>(mma_pv, frag_p, tOrV(_, _, _, v_read.index()), acc_o, first_pv);
    turn_pass();
    warpgroup_wait<0>();
    pipe_v.consumer_release(v_read);
    ++v_read;
  }

  // FP8: multiplies the normalized output by V's channel scales (O = P (V8 diag(v_scale))).
  template <class TensorO>
  static CUTE_DEVICE void apply_v_scale(Params const& p, TensorO& acc_o, int mma_thread_idx, int head, int batch) {
    using namespace cute;
    typename Traits::TiledMmaPV mma_pv;
    Tensor tOcO = mma_pv.get_thread_slice(mma_thread_idx).partition_C(make_identity_tensor(Shape<BlockM, HeadDimT>{}));
    float const* v_scale = p.v_scale + (int64_t(batch) * get<2>(p.shape_q) + head) * kHeadDim;
    CUTE_UNROLL
    for (int i = 0; i < size(acc_o); ++i) acc_o(i) *= __ldg(v_scale + get<1>(tOcO(i)));
  }

  // FP8: the rows' log-sum-exp of the unsmoothed scores: the K smoothing took softmax_scale x q . k_mean
  // out of every score of a row (attn_fp8_quant.hpp); it goes back here.
  template <class RowLse>
  static CUTE_DEVICE void restore_lse(Params const& p, RowLse& lse, int mma_thread_idx, int m_block, int head,
                                      int batch) {
    using namespace cute;
    typename Traits::TiledMmaPV mma_pv;
    Tensor tOcO = mma_pv.get_thread_slice(mma_thread_idx).partition_C(make_identity_tensor(Shape<BlockM, HeadDimT>{}));
    Tensor rows = make_tensor(tOcO.data(), acc_rowcol_layout(tOcO.layout()));
    float const* dots = p.q_dot_kmean + (int64_t(batch) * get<2>(p.shape_q) + head) * p.q_rows + m_block * kBlockM;
    CUTE_UNROLL
    for (int r = 0; r < size<0>(rows); ++r) lse[r] += p.softmax_scale * __ldg(dots + get<0>(rows(r, 0)));
  }
};

}  // namespace xstage::attn
