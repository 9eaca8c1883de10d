// Default epilogue of the attention forward kernel: writes each finished output tile to local global
// memory in the caller's layout, and optionally the rows' log-sum-exp.
// head_dim 128: the rows leave through the copy engine (attn_bulk_store.cuh, the store path of the fused
// All-to-All's kBulk epilogue): each consumer warp stages its 16 rows in shared memory and issues one
// 256-byte bulk copy per row, then returns to the mainloop; the copies of a warp's previous tile have
// read its staging rows before it rewrites them, and a CTA's copies are complete after its last tile.
// head_dim 64: bf16x2 stores straight from the fragment (with 128-byte rows the bulk path measured
// slower; docs/attn_notes.md).
//
// Epilogue policy interface (what the kernel needs from any epilogue, e.g. a remote-store All-to-All):
//   struct Params;                                   // kernel parameter block, passed by value
//   struct SharedStorage;                            // shared memory the epilogue may use
//   template <class TiledMmaPV, class TensorO, class RowLse>
//   static void store(Params const&, SharedStorage&, sched::AttnTile tile, bool last_of_cta,
//                     TensorO const& acc_o, RowLse const& lse, int mma_thread_idx);
//       last_of_cta: no later work of this CTA stores a tile (the kernel's schedule says so; with a split
//       tail a helper segment may still follow, which stores nothing); an epilogue that must finish its
//       own asynchronous work before the CTA exits does it there;
//       acc_o: this thread's normalized fp32 output fragment of the kBlockM x head_dim tile, in
//       TiledMmaPV's accumulator layout; lse: natural-log LSE of the thread's rows;
//       mma_thread_idx: 0 .. kNumMmaThreads-1 over the consumer warpgroups.
//   static void finish(Params const&, SharedStorage&, int mma_thread_idx);   // after the last tile
// The mainloop never sees the epilogue's pointers, so another epilogue plugs in without touching it.
#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cute/tensor.hpp>

#include "attn_bulk_store.cuh"
#include "attn_fragment.cuh"
#include "attn_kernel_traits.cuh"
#include "xstage/gpu/ptx_bulk.cuh"
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
  static constexpr bool kBulk = kHeadDim == 128;
  static constexpr int kPitch = kHeadDim + 8;  // elements; 16-byte pad per row (bank spread of the staging writes)
  struct StagedStorage {
    alignas(16) __nv_bfloat16 stage[kBlockM * kPitch];
  };
  struct NoStorage {};
  using SharedStorage = std::conditional_t<kBulk, StagedStorage, NoStorage>;

  // Bulk path: rows are contiguous along head_dim and start 16-byte aligned (attn_forward_can_implement:
  // strides multiples of 8 elements, 16-byte aligned pointers), as the bulk copies need.
  template <class TiledMmaPV, class TensorO, class RowLse>
  static CUTE_DEVICE void store(Params const& p, SharedStorage& smem, sched::AttnTile const& tile, bool last_of_cta,
                                TensorO const& acc_o, RowLse const& lse, int mma_thread_idx) {
    using namespace cute;
    const int row0 = tile.m_block * kBlockM;
    Element* o_tile = p.o + int64_t(tile.batch) * p.o_stride_batch + int64_t(tile.head) * p.o_stride_head;
    TiledMmaPV mma_pv;
    Tensor tOcO = mma_pv.get_thread_slice(mma_thread_idx)
                      .partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kHeadDim>>{}));  // (row, col)
    static_assert(decltype(size(tOcO))::value == decltype(size(acc_o))::value);
    if constexpr (kBulk) {
      bulk_stage_warp_rows<TiledMmaPV, kBlockM, kHeadDim, kPitch>(smem.stage, acc_o, mma_thread_idx, [&](int r) {
        if (row0 + r < p.seq_q) {
          gpu::bulk_store_s2g(o_tile + int64_t(row0 + r) * p.o_stride_seq, &smem.stage[r * kPitch],
                         kHeadDim * int(sizeof(Element)));
        }
      });
      gpu::bulk_commit_group();
      // After a CTA's last tile its copies must have read the staging rows before the CTA exits. Waited
      // here rather than in finish(): a wait after the consumer loop made ptxas serialize the GMMAs.
      if (last_of_cta) gpu::bulk_wait_all();
    } else {
      // Accumulator values 2i and 2i+1 are adjacent columns of one row: stored as one bf16x2.
      CUTE_UNROLL
      for (int i = 0; i < size(acc_o); i += 2) {
        const int row = row0 + get<0>(tOcO(i));
        const int col = get<1>(tOcO(i));
        if (row < p.seq_q) {
          __nv_bfloat162 v = __floats2bfloat162_rn(acc_o(i), acc_o(i + 1));
          *reinterpret_cast<__nv_bfloat162*>(o_tile + int64_t(row) * p.o_stride_seq + col) = v;
        }
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
