// Register-fragment views and the warpgroup GEMM issue used by the attention mainloop.
#pragma once

#include <cstdint>

#include <cuda_fp8.h>
#include <cute/tensor.hpp>

namespace xstage::attn {

// GMMA accumulator value layout is ((2, 2, N/8), MMA_M, MMA_N): (column pair, row +8, 8-column chunk).
// Row/column view: ((2, MMA_M), (2, N/8, MMA_N)), so softmax can loop over a thread's rows and columns.
template <class Layout>
CUTE_HOST_DEVICE constexpr auto acc_rowcol_layout(Layout const& acc) {
  static_assert(decltype(cute::rank(acc))::value == 3);
  static_assert(decltype(cute::rank<0>(acc))::value == 3);
  return cute::make_layout(cute::make_layout(cute::get<0, 1>(acc), cute::get<1>(acc)),
                           cute::make_layout(cute::get<0, 0>(acc), cute::get<0, 2>(acc), cute::get<2>(acc)));
}

// The accumulator of S = Q K^T, reinterpreted as the register A operand of O = P V (16-bit types):
// a k16 A fragment holds values (k pair, row +8, k +8), i.e. two consecutive 8-column chunks of S.
// ((2, 2, N/8), MMA_M, MMA_N) -> ((2, 2, 2), MMA_M, N/16 * MMA_N).
template <class Layout>
CUTE_HOST_DEVICE constexpr auto acc_to_operand_a_layout(Layout const& acc) {
  auto l = cute::logical_divide(cute::get<0>(acc), cute::Shape<cute::Underscore, cute::Underscore, cute::_2>{});
  return cute::make_layout(cute::make_layout(cute::get<0>(l), cute::get<1>(l), cute::get<2, 0>(l)),
                           cute::get<1>(acc),
                           cute::coalesce(cute::make_layout(cute::get<2, 1>(l), cute::get<2>(acc))));
}

// Register A operand of the FP8 P V GEMM for one warpgroup's 64 x kBlockN P: per k32 instruction the
// e4m3 atom's (4 keys, row +8, keys +16) values, compact (four bytes per register).
template <int kBlockN>
CUTE_HOST_DEVICE constexpr auto fp8_operand_a_layout() {
  static_assert(kBlockN % 32 == 0);
  return cute::make_layout(cute::Shape<cute::Shape<cute::_4, cute::_2, cute::_2>, cute::_1, cute::Int<kBlockN / 32>>{});
}

// Packs P (the fp32 S accumulator after softmax, compact ((2, 2, N/8), 1, 1)) into the e4m3 A operand
// (fp8_operand_a_layout) without moving values between threads: register (row +8, half, k32 block kb)
// takes the column pairs of 8-column chunks 4kb + 2 half and 4kb + 2 half + 1 of its row. Those are not
// the keys the A layout names at those positions; V^T is stored in the matching key order
// (fp8_key_of_slot, xstage/sched/attn_fp8_key_order.hpp), so P V is exact. Rounding: e4m3, round to nearest even,
// saturating (p <= 256 < 448 never saturates).
template <class TensorS, class TensorP>
CUTE_DEVICE void acc_to_fp8_operand_a(TensorS const& acc_s, TensorP& frag_p) {
  using namespace cute;
  // 8-column chunks over all of the accumulator's N modes: a compact ((2, 2, N/8), 1, MMA_N) layout
  // numbers its values pair + 2 row8 + 4 chunk whatever the GMMA atom's N.
  constexpr int kChunks = decltype(size(acc_s))::value / 4;
  static_assert(decltype(size(frag_p))::value == 4 * kChunks, "one byte per accumulator value");
  Tensor regs = recast<uint32_t>(frag_p);
  auto pair = [&](int row8, int chunk) -> uint32_t {
    const int i = 2 * row8 + 4 * chunk;  // compact accumulator: (column pair, row +8, chunk)
    return __nv_cvt_float2_to_fp8x2(make_float2(acc_s(i), acc_s(i + 1)), __NV_SATFINITE, __NV_E4M3);
  };
  CUTE_UNROLL
  for (int kb = 0; kb < kChunks / 4; ++kb) {
    CUTE_UNROLL
    for (int half = 0; half < 2; ++half) {
      CUTE_UNROLL
      for (int row8 = 0; row8 < 2; ++row8) {
        const int chunk = 4 * kb + 2 * half;
        regs(row8 + 2 * half + 4 * kb) = pair(row8, chunk) | (pair(row8, chunk + 1) << 16);
      }
    }
  }
}

// Issues one warpgroup GEMM C (+)= A B over all k blocks of B and commits it as one wgmma group; the caller
// waits with warpgroup_wait<N>. zero_init starts from C = 0 without clearing registers.
// kARegisters: A holds values in registers (RS); otherwise A and B are shared-memory descriptors (SS).
// B may have a whole multiple of A's k blocks: B's block k then meets A's block k mod A's count (the FP8
// P V GEMM: one P against V's value and remainder terms, C = P V_0 + P V_1).
template <bool kARegisters, class TiledMma, class TensorA, class TensorB, class TensorC>
CUTE_DEVICE void wgmma_issue(TiledMma& tiled_mma, TensorA const& tA, TensorB const& tB, TensorC& tC, bool zero_init) {
  if constexpr (kARegisters) cute::warpgroup_fence_operand(const_cast<TensorA&>(tA));
  cute::warpgroup_fence_operand(tC);
  cute::warpgroup_arrive();
  tiled_mma.accumulate_ = zero_init ? cute::GMMA::ScaleOut::Zero : cute::GMMA::ScaleOut::One;
  constexpr int kBlocksA = decltype(cute::size<2>(tA))::value;
  static_assert(decltype(cute::size<2>(tB))::value % kBlocksA == 0, "B's k blocks: a whole multiple of A's");
  CUTE_UNROLL
  for (int k = 0; k < cute::size<2>(tB); ++k) {
    cute::gemm(tiled_mma, tA(cute::_, cute::_, k % kBlocksA), tB(cute::_, cute::_, k), tC);
    tiled_mma.accumulate_ = cute::GMMA::ScaleOut::One;
  }
  cute::warpgroup_commit_batch();
  cute::warpgroup_fence_operand(tC);
  if constexpr (kARegisters) cute::warpgroup_fence_operand(const_cast<TensorA&>(tA));
}

}  // namespace xstage::attn
