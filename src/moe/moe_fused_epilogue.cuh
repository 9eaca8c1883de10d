// Epilogues of the fused MoE kernel's two tile kinds.
//  SwiGLU (Linear-1): accumulator columns j (gate) and 64 + j (up) of the 128-wide tile sit in the
//  same thread (value i and i + size/2 of the GMMA accumulator: the second half of its 8-column
//  chunks); gate and up are rounded to bf16, h = bf16(silu(gate) · up) (the reference's roundings), stored
//  to the local SwiGLU buffer. Rows past the expert's count are computed on padding and never read
//  back into a result.
//  FP8 SwiGLU: the same bf16 h values, then quantized to e4m3 per row and 128-channel group with the
//  reference's scale rule. A tile holds 64 h columns (the 4 lanes of a quad hold a row's 64, so their
//  maximum is two shuffles); the other 64 of the group are the partner CTA's tile at the same step
//  (N-tile n ^ 1 of the same row block), so one lane per quad sends its two rows' maxima into the
//  partner's shared memory (st.async, completing transaction bytes on the partner's barrier: no fence,
//  so the pending NVLink stores of this thread are not waited for), waits (bounded) for the partner's,
//  and both CTAs compute the same scale; role 0 writes it to h_scale[row][n / 2].
//  Combine (Linear-2): the tile is rounded to bf16 into shared memory (64 rows per warpgroup), then
//  each row goes back to the rank and top-k slot it came from as 16-byte stores into that rank's
//  combine buffer comb[slot][hidden] (no atomics: every slot is written by one tile column once),
//  either at once in the epilogue or piggybacked on the next tile's k-steps (combine_piggyback).
#pragma once

#include <cstdint>

#include <cute/arch/cluster_sm90.hpp>
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "moe_fused_kernel.hpp"
#include "moe_fused_mainloop.cuh"
#include "moe_fp8.cuh"
#include "moe_fused_sync.cuh"
#include "xstage/gpu/ptx_math.cuh"
#include "xstage/moe/moe_fused_layout.hpp"
#include "xstage/moe/moe_numerics.hpp"

namespace xstage::moe {

// Row and column of accumulator value i of consumer thread t (0..255) in the 128 x 128 tile: the SM90
// GMMA 64xN F32 layout, value i = a + 2·b + 4·c -> row 16·warp + lane/4 + 8·b, column 8·c + 2·(lane%4) + a,
// warpgroup w adding 64·w rows (checked against CuTe's partition_C). Closed form: no per-value
// coordinate registers.
__device__ __forceinline__ int acc_row(int t, int i) { return (t / 128) * 64 + ((t % 128) / 32) * 16 + (t % 32) / 4 + 8 * ((i / 2) % 2); }
__device__ __forceinline__ int acc_col(int t, int i) { return 8 * (i / 4) + 2 * (t % 4) + (i % 2); }

// Two floats as bf16 (round to nearest even, float_to_bf16_bits' rounding), `lo` in the low half: one
// conversion instruction for the pair.
__device__ __forceinline__ std::uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&v);
}

// A bf16 pair (pack_bf16x2's layout) widened back to floats: the values round_bf16 gives.
__device__ __forceinline__ float2 unpack_bf16x2(std::uint32_t p) {
  return make_float2(__uint_as_float(p << 16), __uint_as_float(p & 0xffff0000u));
}

// swiglu_bf16 (moe_numerics.hpp) of two elements, with inputs and outputs as bf16 pairs: silu(g) · u with
// e^{-g} = 2^{-g·log2 e} and the reciprocal from the approximate instructions (ex2.approx.ftz,
// rcp.approx.ftz: the fast exponential's and division's instructions without their range fix-ups;
// relative error ~1e-6, far below the bf16 rounding that follows; g → -inf gives e^{-g} = inf and
// silu(g) = -0, as the exact formula's limit). One conversion instruction rounds each pair.
__device__ __forceinline__ std::uint32_t swiglu_bf16x2_fast(std::uint32_t gate_bf16x2, std::uint32_t up_bf16x2) {
  const float2 g = unpack_bf16x2(gate_bf16x2), u = unpack_bf16x2(up_bf16x2);
  const float e0 = gpu::ex2_approx_ftz(g.x * -1.44269504088896341f);
  const float e1 = gpu::ex2_approx_ftz(g.y * -1.44269504088896341f);
  const float r0 = gpu::rcp_approx_ftz(1.f + e0);
  const float r1 = gpu::rcp_approx_ftz(1.f + e1);
  return pack_bf16x2(g.x * r0 * u.x, g.y * r1 * u.y);
}

// l1_count: this consumer's Linear-1 tiles so far (the partner's count is the same at the same tile).
template <class T, class Acc>
__device__ __forceinline__ void moe_store_swiglu(const MoeFusedKernelParams& p, typename T::SharedStorage& smem,
                                                 const sched::MoeTile& tile, const Acc& acc, int mma_thread_idx,
                                                 std::uint32_t l1_count) {
  using namespace cute;
  constexpr int kHalf = decltype(size(acc))::value / 2;
  const long long row0 = (long long)tile.row * T::kBlockM;
  if constexpr (!T::kFp8) {
    std::uint16_t* base =
        static_cast<std::uint16_t*>(p.epilogue.h) + row0 * p.shape.h_inter + tile.n * (T::kBlockN / 2);
    CUTE_UNROLL
    for (int i = 0; i < kHalf; i += 2) {  // values i, i + 1: one row, adjacent columns
      const int r = acc_row(mma_thread_idx, i), c = acc_col(mma_thread_idx, i);
      *reinterpret_cast<std::uint32_t*>(base + (long long)r * p.shape.h_inter + c) =
          swiglu_bf16x2_fast(pack_bf16x2(acc(i), acc(i + 1)), pack_bf16x2(acc(i + kHalf), acc(i + 1 + kHalf)));
    }
  } else {
    // Values i with (i / 2) % 2 == rs belong to row acc_row(t, 2·rs); kHalf / 2 of them per row.
    float h[kHalf];
    float amax[2] = {0.f, 0.f};
    CUTE_UNROLL
    for (int i = 0; i < kHalf; i += 2) {
      const float2 hv = unpack_bf16x2(
          swiglu_bf16x2_fast(pack_bf16x2(acc(i), acc(i + 1)), pack_bf16x2(acc(i + kHalf), acc(i + 1 + kHalf))));
      h[i] = hv.x;
      h[i + 1] = hv.y;
      amax[(i / 2) % 2] = fmaxf(amax[(i / 2) % 2], fmaxf(fabsf(hv.x), fabsf(hv.y)));
    }
    CUTE_UNROLL
    for (int rs = 0; rs < 2; ++rs) amax[rs] = group_amax<4>(amax[rs]);  // the quad holds the row's 64 columns
    // The partner's 64 columns of the 128-channel group: exchange the two rows' maxima (buffer and
    // barrier by tile parity; a barrier's phase completes every second Linear-1 tile).
    const std::uint32_t cta = cute::block_rank_in_cluster(), buf = l1_count & 1, parity = (l1_count >> 1) & 1;
    const int lane = mma_thread_idx % 32;
    if (mma_thread_idx == 0)
      cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&smem.amax_bar[buf], T::kBlockM * sizeof(float));
    if (lane % 4 == 0) {
      const std::uint32_t bar = cute::cast_smem_ptr_to_uint(&smem.amax_bar[buf]);
      CUTE_UNROLL
      for (int rs = 0; rs < 2; ++rs)  // st.async into the partner, completing 4 bytes on its barrier
        cute::store_shared_remote(__float_as_uint(amax[rs]),
                                  cute::cast_smem_ptr_to_uint(&smem.amax_peer[buf][acc_row(mma_thread_idx, 2 * rs)]),
                                  bar, cta ^ 1);
      moe_wait_phase(&smem.amax_bar[buf], parity, p.sync.timeout_ns, p.sync.failure, kMoeWaitPeerAmax, p.shape.rank,
                     tile.row);
      CUTE_UNROLL
      for (int rs = 0; rs < 2; ++rs) amax[rs] = fmaxf(amax[rs], smem.amax_peer[buf][acc_row(mma_thread_idx, 2 * rs)]);
    }
    const int groups = p.shape.h_inter / kFp8GroupSize;
    std::uint8_t* base = static_cast<std::uint8_t*>(p.epilogue.h) + row0 * p.shape.h_inter + tile.n * (T::kBlockN / 2);
    CUTE_UNROLL
    for (int rs = 0; rs < 2; ++rs) {
      const float scale = fp8_scale_for_amax(__shfl_sync(0xffffffffu, amax[rs], lane & ~3));
      const float inv = fp8_inverse_scale(scale);
      const int r = acc_row(mma_thread_idx, 2 * rs);
      if (lane % 4 == 0 && cta == 0) p.epilogue.h_scale[(row0 + r) * groups + tile.n / 2] = scale;
      CUTE_UNROLL
      for (int i = 2 * rs; i < kHalf; i += 4) {
        const std::uint16_t q = __nv_cvt_float2_to_fp8x2(make_float2(h[i] * inv, h[i + 1] * inv), __NV_SATFINITE, __NV_E4M3);
        *reinterpret_cast<std::uint16_t*>(base + (long long)r * p.shape.h_inter + acc_col(mma_thread_idx, i)) = q;
      }
    }
  }
}

// One consumer thread's share of a staged Linear-2 tile's Combine stores: the warpgroup's 64 staged rows
// × kBlockN / 8 16-byte chunks, chunk it·128 + t of the warpgroup for it = 0 .. kCombineChunksPerThread - 1.
template <class T>
inline constexpr int kCombineChunksPerThread = 64 * (T::kBlockN / 8) / 128;
static_assert(kCombineChunksPerThread<MoeFusedTraitsT<false>> == kFusedCombineChunks &&
                  kCombineChunksPerThread<MoeFusedTraitsT<true>> == kFusedCombineChunks,
              "the simulator's piggyback model (kFusedCombineChunks) issues the chunks the kernel does");

// Combine chunks staged but not yet stored (piggybacked mode): the tile's row block and N-tile, its valid
// rows and the next chunk of this thread; next == kCombineChunksPerThread: nothing pending.
struct MoeCombinePending {
  int row = 0, n = 0, valid = 0, next = 0;
};

// Stores chunk `it` of this thread's share of the staged tile (row block `row`, N-tile `n`, `valid` rows):
// the row goes back to the rank and top-k slot it came from.
template <class T>
__device__ __forceinline__ void moe_combine_store_chunk(const MoeFusedKernelParams& p, const std::uint16_t* stage,
                                                        int row, int n, int valid, int it, int mma_thread_idx) {
  constexpr int kChunks = T::kBlockN / 8;  // 16-byte chunks per row
  const int wg = mma_thread_idx / 128, t = mma_thread_idx % 128;
  const int idx = it * 128 + t;
  const int r = wg * 64 + idx / kChunks, ch = idx % kChunks;
  if (r >= valid) return;
  // Acquired with the tile's rows.
  const int origin = gpu::ld_after_acquire_s32(p.epilogue.origin + (long long)row * T::kBlockM + r);
  const int src = moe_origin_rank(origin);
  const long long slot = moe_origin_slot(origin);
  const uint4 v = *reinterpret_cast<const uint4*>(stage + r * T::kEpiPitch + ch * 8);
#if defined(XSTAGE_MOE_FUSED_TRACE)
  std::uint16_t* comb = p.trace.comb_local != nullptr ? p.trace.comb_local : p.epilogue.comb_peer[src];
#else
  std::uint16_t* comb = p.epilogue.comb_peer[src];
#endif
  *reinterpret_cast<uint4*>(comb + slot * p.shape.hidden + n * T::kBlockN + ch * 8) = v;
}

// Piggybacked mode: up to `count` of this thread's pending chunks (count >= kCombineChunksPerThread: all).
template <class T>
__device__ __forceinline__ void moe_combine_issue_pending(const MoeFusedKernelParams& p,
                                                          typename T::SharedStorage& smem, MoeCombinePending& q,
                                                          int count, int mma_thread_idx) {
  const std::uint16_t* stage = reinterpret_cast<const std::uint16_t*>(smem.epi.data());
  for (int c = 0; c < count && q.next < kCombineChunksPerThread<T>; ++c, ++q.next)
    moe_combine_store_chunk<T>(p, stage, q.row, q.n, q.valid, q.next, mma_thread_idx);
}

// The Linear-2 epilogue: the tile rounded to bf16 into the staging buffer (64 rows per warpgroup), then
// either every Combine store at once (piggyback false) or, piggybacked, the stores left in `pending`
// for the next tile's mainloop (the chunks still pending from the previous tile are stored first: the
// staging buffer is about to be overwritten).
// t_store (traced builds): [begin, end] of the tile's Combine stores in this epilogue, stamped by consumer
// thread 0 (piggybacked: end = begin, the stores leave with the next tile's k-steps).
template <class T, class Acc>
__device__ __forceinline__ void moe_store_combine(const MoeFusedKernelParams& p, typename T::SharedStorage& smem,
                                                  const sched::MoeTile& tile, int valid_rows, const Acc& acc,
                                                  int mma_thread_idx, bool piggyback, MoeCombinePending& pending,
                                                  std::uint64_t* t_store = nullptr) {
  using namespace cute;
  const int wg = mma_thread_idx / 128;
  std::uint16_t* stage = reinterpret_cast<std::uint16_t*>(smem.epi.data());
  if (piggyback) moe_combine_issue_pending<T>(p, smem, pending, kCombineChunksPerThread<T>, mma_thread_idx);
  gpu::named_barrier_sync(128, MoeNamedBarrier::kWarpgroup0, wg);  // this warpgroup's previous copy-out is done
  CUTE_UNROLL
  for (int i = 0; i < decltype(size(acc))::value; i += 2) {
    const int r = acc_row(mma_thread_idx, i), c = acc_col(mma_thread_idx, i);
    *reinterpret_cast<std::uint32_t*>(stage + r * T::kEpiPitch + c) = pack_bf16x2(acc(i), acc(i + 1));
  }
  gpu::named_barrier_sync(128, MoeNamedBarrier::kWarpgroup0, wg);
#if defined(XSTAGE_MOE_FUSED_TRACE)
  if (t_store != nullptr && mma_thread_idx == 0) t_store[0] = gpu::globaltimer_ns();
#endif
  if (piggyback) {
    pending = MoeCombinePending{int(tile.row), int(tile.n), valid_rows, 0};
  } else {
    CUTE_UNROLL
    for (int it = 0; it < kCombineChunksPerThread<T>; ++it)
      moe_combine_store_chunk<T>(p, stage, tile.row, tile.n, valid_rows, it, mma_thread_idx);
  }
#if defined(XSTAGE_MOE_FUSED_TRACE)
  if (t_store != nullptr) {
    if (!piggyback) gpu::named_barrier_sync(T::kNumMmaThreads, MoeNamedBarrier::kConsumers);  // all issued
    if (mma_thread_idx == 0) t_store[1] = piggyback ? t_store[0] : gpu::globaltimer_ns();
  }
#endif
}

}  // namespace xstage::moe
