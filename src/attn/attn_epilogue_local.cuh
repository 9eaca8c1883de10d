// Default epilogue of the attention forward kernel: writes each finished output tile to local global
// memory in the caller's layout, and optionally the rows' log-sum-exp.
//
// Epilogue policy interface (what the kernel needs from any epilogue, e.g. a remote-store All-to-All):
//   struct Params;                                   // kernel parameter block, passed by value
//   struct SharedStorage;                            // shared memory the epilogue may use
//   template <class TiledMmaPV, class TensorO, class RowLse>
//   static void store(Params const&, SharedStorage&, sched::AttnTile tile, TensorO const& acc_o,
//                     RowLse const& lse, int mma_thread_idx);
//       acc_o: this thread's normalized fp32 output fragment of the kBlockM x head_dim tile, in
//       TiledMmaPV's accumulator layout; lse: natural-log LSE of the thread's rows;
//       mma_thread_idx: 0 .. kNumMmaThreads-1 over the consumer warpgroups.
//   static void finish(Params const&, SharedStorage&, int mma_thread_idx);   // after the last tile
// The mainloop never sees the epilogue's pointers, so another epilogue plugs in without touching it.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cute/tensor.hpp>

#include "attn_fragment.cuh"
#include "attn_kernel_traits.cuh"
#include "xstage/sched/attn_tile_scheduler.hpp"

namespace xstage::attn {

template <class Traits>
struct AttnEpilogueLocal {
  using Element = typename Traits::Element;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kHeadDim = Traits::kHeadDim;

  struct Params {
    Element* o;
    int64_t o_stride_batch, o_stride_seq, o_stride_head;  // elements; head-dim stride is 1
    float* lse;                                           // [batch, heads, seq_q] or nullptr
    int seq_q;
    int heads;
  };
  struct SharedStorage {};

  template <class TiledMmaPV, class TensorO, class RowLse>
  static CUTE_DEVICE void store(Params const& p, SharedStorage&, sched::AttnTile const& tile, TensorO const& acc_o,
                                RowLse const& lse, int mma_thread_idx) {
    using namespace cute;
    TiledMmaPV mma_pv;
    auto thr_pv = mma_pv.get_thread_slice(mma_thread_idx);
    Tensor cO = make_identity_tensor(Shape<Int<kBlockM>, Int<kHeadDim>>{});
    Tensor tOcO = thr_pv.partition_C(cO);  // (row, col) of each acc_o element within the tile
    static_assert(decltype(size(tOcO))::value == decltype(size(acc_o))::value);

    const int row0 = tile.m_block * kBlockM;
    Element* o_tile = p.o + int64_t(tile.batch) * p.o_stride_batch + int64_t(tile.head) * p.o_stride_head;
    // Accumulator values 2i and 2i+1 are adjacent columns of one row: store them as one bf16x2.
    CUTE_UNROLL
    for (int i = 0; i < size(acc_o); i += 2) {
      const int row = row0 + get<0>(tOcO(i));
      const int col = get<1>(tOcO(i));
      if (row < p.seq_q) {
        __nv_bfloat162 v = __floats2bfloat162_rn(acc_o(i), acc_o(i + 1));
        *reinterpret_cast<__nv_bfloat162*>(o_tile + int64_t(row) * p.o_stride_seq + col) = v;
      }
    }
    if (p.lse != nullptr && (mma_thread_idx % 4) == 0) {
      Tensor rc = make_tensor(tOcO.data(), acc_rowcol_layout(tOcO.layout()));
      CUTE_UNROLL
      for (int r = 0; r < size<0>(rc); ++r) {
        const int row = row0 + get<0>(rc(r, 0));
        if (row < p.seq_q) {
          p.lse[(int64_t(tile.batch) * p.heads + tile.head) * p.seq_q + row] = lse[r];
        }
      }
    }
  }

  static CUTE_DEVICE void finish(Params const&, SharedStorage&, int) {}
};

}  // namespace xstage::attn
