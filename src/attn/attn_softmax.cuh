// Online softmax over the S accumulator of one consumer thread (two query rows per thread per 64-row
// warpgroup slice), in base 2: p = 2^(s * scale_log2 - m * scale_log2), one FFMA and one EX2 per element.
//
// kBlockScaled (the FP8 path): each row's raw scores in a key block carry their own factor c (softmax
// scale x log2(e) x the row's Q and the block's K quantization scales), so the running max is kept in
// the scaled log2 domain, and p = 2^(s c - m + 8): P is produced with 2^8 headroom, in [0, 256], where e4m3 keeps
// full precision down to 2^-6 x 256 instead of flushing small probabilities. The headroom cancels in
// the normalization (the row sum carries it too) and is taken out of the log-sum-exp. kScoreBias: the
// kBlockScaled raw scores arrive as s + kScoreBias (INT8 scores read as floats without a conversion,
// attn_fp8_quant.hpp); the bias leaves inside the same FFMA, as a per-row constant that the normalization cancels.
#pragma once

#include <cmath>

#include <cute/tensor.hpp>

#include "attn_fp8_quant.hpp"
#include "attn_fragment.cuh"
#include "xstage/gpu/ex2_poly.hpp"
#include "xstage/gpu/ptx_math.cuh"
#include "xstage/sched/attn_tuning.hpp"

namespace xstage::attn {

// The four threads of a quad hold the same rows (GMMA accumulator layout): reduce across them.
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

template <int kRows, bool kBlockScaled = false>
struct OnlineSoftmax {
  static constexpr float kScoreBias = kBlockScaled ? kFp8QkIntBias : 0.f;
  static constexpr int kNumRows = kRows;
  static constexpr float kPLog2Headroom = 8.f;  // kBlockScaled: p carries a factor 2^8
  // kBlockScaled: how many of every 8 exponentials of a row come from the FMA pipe (gpu::ex2_poly3, relative
  // error 1.2e-4, far below P's e4m3 rounding) instead of MUFU. With 8-bit GEMMs the softmax is the critical
  // path and MUFU.EX2 (16 per SM per cycle) its narrowest pipe: 2 of 8 measured 0.3-3.8 % faster than 0 and the
  // best of 0..4; 4 of 8 5-6 % slower than 0 (docs/attn_fp8.md). sched::kAttnFp8PolyExpPer8 (attn_tuning.hpp).
  static constexpr int kFp8PolyExpPer8 = sched::kAttnFp8PolyExpPer8;
  float row_max[kRows];  // running max: of raw scores (unscaled), or kBlockScaled: of s c_j (log2 domain)
  float row_sum[kRows];  // running sum of p, per thread; reduced over the quad only at the end
  float scale_log2;      // softmax_scale * log2(e)
  float softmax_scale;

  __device__ OnlineSoftmax(float scale, float scale_log2_) : scale_log2(scale_log2_), softmax_scale(scale) {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      row_max[r] = -INFINITY;
      row_sum[r] = 0.f;
    }
  }

  // Replaces the scores in acc_s by p and returns, per row, the factor by which the output
  // accumulated so far must be multiplied (meaningless for the first block). row_scale_log2: each row's
  // c for this block (kBlockScaled only).
  template <bool kFirst, class TensorS, class RowScales = float>
  __device__ __forceinline__ cute::array<float, kRows> step(TensorS& acc_s, RowScales const& row_scale_log2 = {}) {
    if constexpr (kBlockScaled) {
      return step_block_scaled<kFirst>(acc_s, row_scale_log2);
    } else {
      return step_unscaled<kFirst>(acc_s);
    }
  }

  // Four independent max chains (a thread row has 32 columns): max is exact in any order, and the
  // chains let FMNMX issue back to back instead of waiting on one 32-long dependency chain.
  template <class TensorRowCol>
  static __device__ __forceinline__ float row_max_of(TensorRowCol const& s, int r, float seed) {
    constexpr int kCols = decltype(cute::size<1>(s))::value;
    static_assert(kCols % 4 == 0);
    float mc[4] = {seed, s(r, 1), s(r, 2), s(r, 3)};
    mc[0] = fmaxf(mc[0], s(r, 0));
    CUTE_UNROLL
    for (int c = 4; c < kCols; c += 4) {
      CUTE_UNROLL
      for (int k = 0; k < 4; ++k) mc[k] = fmaxf(mc[k], s(r, c + k));
    }
    return quad_max(fmaxf(fmaxf(mc[0], mc[1]), fmaxf(mc[2], mc[3])));
  }

  template <bool kFirst, class TensorS>
  __device__ __forceinline__ cute::array<float, kRows> step_block_scaled(TensorS& acc_s,
                                                                        cute::array<float, kRows> const& c) {
    auto s = cute::make_tensor(acc_s.data(), acc_rowcol_layout(acc_s.layout()));
    static_assert(decltype(cute::size<0>(s))::value == kRows);
    cute::array<float, kRows> rescale;
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      constexpr int kCols = decltype(cute::size<1>(s))::value;
      // c > 0, so the max of s c is c times the max of s. The biased max is exact: the scores are integers
      // below 2^22 and their biased floats are spaced by 1.
      const float m = fmaxf(row_max[r], (row_max_of(s, r, -INFINITY) - kScoreBias) * c[r]);
      rescale[r] = kFirst || m == row_max[r] ? 1.f : gpu::ex2_approx_ftz(row_max[r] - m);
      row_max[r] = m;
      const float bias = kPLog2Headroom - m - kScoreBias * c[r];
      // Four partial sums: the FP8 GEMMs are short, so the softmax's dependency chains are the critical path,
      // and one 32-long chain of FADDs was its longest.
      float sums[4] = {0.f, 0.f, 0.f, 0.f};
      CUTE_UNROLL
      for (int j = 0; j < kCols; ++j) {
        const float x = __fmaf_rn(s(r, j), c[r], bias);
        const float p = j % 8 < kFp8PolyExpPer8 ? gpu::ex2_poly3(x) : gpu::ex2_approx_ftz(x);
        s(r, j) = p;
        sums[j % 4] += p;
      }
      const float sum = (sums[0] + sums[1]) + (sums[2] + sums[3]);
      row_sum[r] = kFirst ? sum : __fmaf_rn(row_sum[r], rescale[r], sum);
    }
    return rescale;
  }

  template <bool kFirst, class TensorS>
  __device__ __forceinline__ cute::array<float, kRows> step_unscaled(TensorS& acc_s) {
    auto s = cute::make_tensor(acc_s.data(), acc_rowcol_layout(acc_s.layout()));
    static_assert(decltype(cute::size<0>(s))::value == kRows);
    cute::array<float, kRows> rescale;
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      constexpr int kCols = decltype(cute::size<1>(s))::value;
      const float m = row_max_of(s, r, row_max[r]);
      // Every row has a finite score in its first block (at least one key is valid), so m is finite.
      const float m_scaled = m * scale_log2;
      // Exactly 1 when the running max did not move (the common case once a few key blocks are in),
      // so rescale_output can skip the multiply without changing a bit of the result.
      rescale[r] = kFirst || m == row_max[r] ? 1.f : gpu::ex2_approx_ftz((row_max[r] - m) * scale_log2);
      row_max[r] = m;
      // Four partial sums, as in step_block_scaled: one 32-long chain of dependent FADDs per row stalls the
      // warp's in-order issue between the exponentials (Nsight Compute: "fixed latency execution dependency").
      float sums[4] = {0.f, 0.f, 0.f, 0.f};
      CUTE_UNROLL
      for (int c = 0; c < kCols; ++c) {
        const float p = gpu::ex2_approx_ftz(__fmaf_rn(s(r, c), scale_log2, -m_scaled));
        s(r, c) = p;
        sums[c % 4] += p;
      }
      const float sum = (sums[0] + sums[1]) + (sums[2] + sums[3]);
      row_sum[r] = kFirst ? sum : __fmaf_rn(row_sum[r], rescale[r], sum);
    }
    return rescale;
  }

  // The factor that brings a partial state with row max m to the merged row max m_new (m <= m_new): the
  // split tail's merge (attn_split.cuh). Exactly 1 when m is the merged max.
  __device__ __forceinline__ float merge_weight(float m, float m_new) const {
    if (m == m_new) return 1.f;
    return kBlockScaled ? gpu::ex2_approx_ftz(m - m_new) : gpu::ex2_approx_ftz((m - m_new) * scale_log2);
  }

  // Multiplies the output rows by their rescale factors. A warp whose 16 rows all kept their max
  // (every factor exactly 1) skips the multiplies: a multiply by 1 is the identity, so the result is
  // bit-identical, and in the steady state most warps skip (the max of a row moves ever more rarely
  // as key blocks accumulate), which saves a sixth of the softmax's ALU instructions.
  template <class TensorO>
  __device__ __forceinline__ void rescale_output(TensorO& acc_o, cute::array<float, kRows> const& rescale) const {
    bool moved = false;
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) moved |= rescale[r] != 1.f;
    if (!__any_sync(0xffffffffu, moved)) return;
    auto o = cute::make_tensor(acc_o.data(), acc_rowcol_layout(acc_o.layout()));
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      CUTE_UNROLL
      for (int c = 0; c < cute::size<1>(o); ++c) o(r, c) *= rescale[r];
    }
  }

  // Normalizes the output by the row sums and returns the natural-log log-sum-exp of each row.
  template <class TensorO>
  __device__ __forceinline__ cute::array<float, kRows> finalize(TensorO& acc_o) {
    auto o = cute::make_tensor(acc_o.data(), acc_rowcol_layout(acc_o.layout()));
    cute::array<float, kRows> lse;
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const float sum = quad_sum(row_sum[r]);
      const float inv = 1.f / sum;
      CUTE_UNROLL
      for (int c = 0; c < cute::size<1>(o); ++c) o(r, c) *= inv;
      if constexpr (kBlockScaled) {
        lse[r] = (row_max[r] - kPLog2Headroom) * 0.6931471805599453f + logf(sum);
      } else {
        lse[r] = row_max[r] * softmax_scale + logf(sum);
      }
    }
    return lse;
  }
};

}  // namespace xstage::attn
