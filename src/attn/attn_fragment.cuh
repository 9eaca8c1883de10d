// Register-fragment views and the warpgroup GEMM issue used by the attention mainloop.
#pragma once

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

// Issues one warpgroup GEMM C (+)= A B over all k blocks and commits it as one wgmma group; the caller
// waits with warpgroup_wait<N>. zero_init starts from C = 0 without clearing registers.
// kARegisters: A holds values in registers (RS); otherwise A and B are shared-memory descriptors (SS).
template <bool kARegisters, class TiledMma, class TensorA, class TensorB, class TensorC>
CUTE_DEVICE void wgmma_issue(TiledMma& tiled_mma, TensorA const& tA, TensorB const& tB, TensorC& tC, bool zero_init) {
  if constexpr (kARegisters) cute::warpgroup_fence_operand(const_cast<TensorA&>(tA));
  cute::warpgroup_fence_operand(tC);
  cute::warpgroup_arrive();
  tiled_mma.accumulate_ = zero_init ? cute::GMMA::ScaleOut::Zero : cute::GMMA::ScaleOut::One;
  CUTE_UNROLL
  for (int k = 0; k < cute::size<2>(tA); ++k) {
    cute::gemm(tiled_mma, tA(cute::_, cute::_, k), tB(cute::_, cute::_, k), tC);
    tiled_mma.accumulate_ = cute::GMMA::ScaleOut::One;
  }
  cute::warpgroup_commit_batch();
  cute::warpgroup_fence_operand(tC);
  if constexpr (kARegisters) cute::warpgroup_fence_operand(const_cast<TensorA&>(tA));
}

}  // namespace xstage::attn
