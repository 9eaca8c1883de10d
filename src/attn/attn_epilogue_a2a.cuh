// Fused post-attention All-to-All epilogue (X-Stage piggyback, paper §4.3 / §5.3): each finished output
// tile is stored straight into the GPU that owns its rows after the Ulysses All-to-All, and the
// consumer warpgroups resume the next tile's Q-loop at once; that Q-loop is the drain window.
//
// Mapping. The kernel runs over the full sequence (seq rows, this rank's heads_per_gpu heads) with its
// query rows rotated (kernel row i is sequence row (i + row_rotation) mod seq: the rank's own rows come
// last, see a2a_params.hpp). Sequence row g
// belongs to owner = g / shard_len (the last shard is shorter when seq is not a multiple of the
// world size; a tile may straddle two owners) at the owner's local row g - owner * shard_len. The
// owner's buffer is [local_seq, heads_total, head_dim] (the DiT layout) and this rank writes heads
// [head_offset, head_offset + heads_per_gpu). dst[owner] is the owner's buffer as this GPU reaches it
// (an NCCL symmetric-window LSA pointer or a CUDA peer pointer; dst[rank] is the local buffer),
// read from a small device table.
//
// Store paths (A2AStoreMode).
//   kStaged: each consumer warpgroup converts its 64 rows to bf16 in shared memory (rows padded by
//     16 bytes so the fragment's bf16x2 writes hit 32 distinct banks), synchronizes on its own named
//     barrier, then every thread issues 16-byte vector stores: a warp writes two full 256-byte rows.
//   kDirect: no staging; each thread stores its fragment's bf16x2 pairs straight to the owner.
//   kBulk: TMA bulk stores, no named barrier per tile. In the wgmma m64 accumulator layout warp w of
//     the consumer warps holds tile rows [16w, 16w + 16), so each warp stages only its own 16 rows
//     (same padded buffer as kStaged), fence.proxy.async.shared::cta + __syncwarp, then lanes 0..15
//     each issue one 256-byte cp.async.bulk.global.shared::cta of their row to the row's owner (rows
//     past seq skipped; a tile that straddles two owners is handled per row) and commit a bulk group.
//     The copy engine reads shared memory and writes the owner's memory while the warp returns to the
//     mainloop. Before the next tile overwrites the staging rows each lane waits with
//     cp.async.bulk.wait_group.read 0 (shared-memory reads done; not remote completion).
//
// Completion. Piggyback (kCompletionCoupled = false): no per-tile wait. Once per CTA, after the last
// tile: the consumers arrive at a named barrier that the producer's TMA warp waits on, then one
// thread publishes flags[p][rank * kMaxCtas + cta] =
// epoch + 1 with st.release.sys to every rank p (docs/memory_ordering.md, Publishing).
// The reader (ulysses_a2a_wait, the next kernel on the owner's stream) acquires all of them first.
//
// With kBulk, the last tile's issuing lanes first wait with cp.async.bulk.wait_group 0 (the bulk
// writes are complete and visible to the issuing thread), then fence.proxy.async.global: the payload
// was written through the async proxy and the flag is a generic-proxy release, and the PTX memory
// model orders operations of different proxies only through a proxy fence; with it, the async writes
// precede the thread's bar.arrive, which the producer's bar.sync and st.release.sys (cumulative)
// extend to the owner (docs/memory_ordering.md, Async proxy). Once per CTA: free.
//
// Completion-coupled (kCompletionCoupled = true, the paper's counterfactual): after its tile's stores
// every storing thread executes fence.sc.sys, which does not retire until the thread's earlier stores
// are performed system-wide (acknowledged by the owner's memory), then the warpgroup meets at its
// named barrier before returning to the mainloop: no consumer starts the next tile before its whole
// 64-row half tile is remotely complete. With kBulk the coupled wait is the bulk one: every tile ends
// with cp.async.bulk.wait_group 0 (this warp's rows remotely complete) + __syncwarp before the warp
// returns to the mainloop, like for like with the piggyback bulk epilogue. The final flags are
// published as above.
#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "a2a_params.hpp"
#include "attn_bulk_store.cuh"
#include "attn_kernel_traits.cuh"
#include "attn_named_barriers.cuh"
#include "xstage/gpu/ptx_bulk.cuh"
#include "xstage/gpu/ptx_memory.cuh"
#include "xstage/sched/attn_tile_scheduler.hpp"

namespace xstage::attn {

// Once per CTA, after all its payload stores and a barrier that orders them before this thread.
__device__ __forceinline__ void a2a_publish_cta_flags(A2AEpilogueParams const& p, int cta) {
  const uint32_t next = *p.epoch + 1;  // written by the previous kernel on this stream
  for (int r = 0; r < p.world; ++r) gpu::publish_flag_release(p.flags[r] + p.rank * kA2AMaxCtas + cta, next);
}

enum class A2AStoreMode {
  kStaged,  // shared-memory staging per warpgroup, 16-byte synchronous stores
  kDirect,  // bf16x2 stores straight from the fragment, exactly like the local epilogue (4-byte stores)
  kBulk,    // shared-memory staging per warp, one 256-byte TMA bulk store per row
};

template <class Traits, bool kCompletionCoupled, A2AStoreMode kMode = A2AStoreMode::kStaged>
struct AttnEpilogueA2A {
  using Element = typename Traits::Element;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kHeadDim = Traits::kHeadDim;
  static constexpr int kRowsPerWg = 64;
  static constexpr int kPitch = kHeadDim + 8;  // elements; 16-byte pad per row
  static constexpr int kVecPerRow = kHeadDim * 2 / 16;

  using Params = A2AEpilogueParams;
  struct StagedStorage {
    alignas(16) __nv_bfloat16 stage[kBlockM * kPitch];
  };
  struct NoStorage {};
  static constexpr bool kHasStaging = kMode != A2AStoreMode::kDirect;  // kStaged and kBulk: same buffer
  using SharedStorage = std::conditional_t<kHasStaging, StagedStorage, NoStorage>;

  // The last tile of this CTA (the kernel's schedule says which): arrive (without waiting) at the
  // barrier the producer's TMA warp waits on. bar.arrive orders each thread's earlier stores before the
  // producer's release. (An arrive after the consumer loop, in finish(), made ptxas spill and serialize
  // wgmma; here it does not.)
  static CUTE_DEVICE void arrive_if_last_tile(bool last_of_cta) {
    if (last_of_cta) {
      gpu::named_barrier_arrive(Traits::kNumMmaThreads + 32, AttnNamedBarrier::kA2AFinish);
    }
  }

  template <class TiledMmaPV, class TensorO, class RowLse>
  static CUTE_DEVICE void store(Params const& p, SharedStorage& smem, sched::AttnTile const& tile, bool last_of_cta,
                                TensorO const& acc_o, RowLse const& lse, int mma_thread_idx) {
    if constexpr (kMode == A2AStoreMode::kStaged) {
      store_staged<TiledMmaPV>(p, smem, tile, last_of_cta, acc_o, lse, mma_thread_idx);
    } else if constexpr (kMode == A2AStoreMode::kBulk) {
      store_bulk<TiledMmaPV>(p, smem, tile, last_of_cta, acc_o, mma_thread_idx);
    } else {
      store_direct<TiledMmaPV>(p, tile, last_of_cta, acc_o, mma_thread_idx);
    }
  }

  template <class TiledMmaPV, class TensorO>
  static CUTE_DEVICE void store_bulk(Params const& p, SharedStorage& smem, sched::AttnTile const& tile,
                                     bool last_of_cta, TensorO const& acc_o, int mma_thread_idx) {
    using namespace cute;
    bulk_stage_warp_rows<TiledMmaPV, kBlockM, kHeadDim, kPitch>(smem.stage, acc_o, mma_thread_idx, [&](int r) {
      const int i = tile.m_block * kBlockM + r;  // the kernel's query row (rotated, see a2a_params.hpp)
      if (i < p.seq) {
        const A2ARowOwner o = a2a_row_owner(a2a_sequence_row(i, p.row_rotation, p.seq), p.shard_len);
        Element* base = static_cast<Element*>(p.dst[o.owner]);
        gpu::bulk_store_s2g(base + (int64_t(o.local_row) * p.heads_total + p.head_offset + tile.head) * kHeadDim,
                       &smem.stage[r * kPitch], kHeadDim * int(sizeof(Element)));
      }
    });
    gpu::bulk_commit_group();
    if constexpr (kCompletionCoupled) {
      gpu::bulk_wait_all();  // this warp's rows are performed at the owner before the next tile starts
      __syncwarp();
    }
    if (last_of_cta) {
      // Last tile: writes complete, then ordered before the generic-proxy flag release (see top).
      gpu::bulk_wait_all();
      gpu::fence_proxy_async_global();
      __syncwarp();
      gpu::named_barrier_arrive(Traits::kNumMmaThreads + 32, AttnNamedBarrier::kA2AFinish);
    }
  }

  template <class TiledMmaPV, class TensorO>
  static CUTE_DEVICE void store_direct(Params const& p, sched::AttnTile const& tile, bool last_of_cta,
                                       TensorO const& acc_o, int mma_thread_idx) {
    using namespace cute;
    TiledMmaPV mma_pv;
    auto thr_pv = mma_pv.get_thread_slice(mma_thread_idx);
    Tensor cO = make_identity_tensor(Shape<Int<kBlockM>, Int<kHeadDim>>{});
    Tensor tOcO = thr_pv.partition_C(cO);
    const int row0 = tile.m_block * kBlockM;
    const int head = p.head_offset + tile.head;
    CUTE_UNROLL
    for (int i = 0; i < size(acc_o); i += 2) {
      const int k = row0 + get<0>(tOcO(i));
      if (k < p.seq) {
        const A2ARowOwner o = a2a_row_owner(a2a_sequence_row(k, p.row_rotation, p.seq), p.shard_len);
        Element* base = static_cast<Element*>(p.dst[o.owner]);
        *reinterpret_cast<__nv_bfloat162*>(base + (int64_t(o.local_row) * p.heads_total + head) * kHeadDim +
                                           get<1>(tOcO(i))) = __floats2bfloat162_rn(acc_o(i), acc_o(i + 1));
      }
    }
    if constexpr (kCompletionCoupled) {
      gpu::fence_sc_sys();
      gpu::named_barrier_sync(128, AttnNamedBarrier::kA2AStage0, mma_thread_idx / 128);
    }
    arrive_if_last_tile(last_of_cta);
  }

  template <class TiledMmaPV, class TensorO, class RowLse>
  static CUTE_DEVICE void store_staged(Params const& p, SharedStorage& smem, sched::AttnTile const& tile,
                                       bool last_of_cta, TensorO const& acc_o, RowLse const&, int mma_thread_idx) {
    using namespace cute;
    TiledMmaPV mma_pv;
    auto thr_pv = mma_pv.get_thread_slice(mma_thread_idx);
    Tensor cO = make_identity_tensor(Shape<Int<kBlockM>, Int<kHeadDim>>{});
    Tensor tOcO = thr_pv.partition_C(cO);
    static_assert(decltype(size(tOcO))::value == decltype(size(acc_o))::value);
    const int wg = mma_thread_idx / 128;
    const int t = mma_thread_idx % 128;

    // Same rounding as the local epilogue (bf16x2 from adjacent fp32 columns): the bytes that reach
    // the owner are the bytes the serial path writes. The staging tensor is partitioned like the
    // accumulator, so every store is one base register plus a compile-time offset (addresses computed
    // from coordinates are hoisted out of the tile loop and cost registers across the mainloop).
    Tensor sO = make_tensor(make_smem_ptr(smem.stage),
                            make_layout(Shape<Int<kBlockM>, Int<kHeadDim>>{}, Stride<Int<kPitch>, _1>{}));
    Tensor tOsO = thr_pv.partition_C(sO);
    CUTE_UNROLL
    for (int i = 0; i < size(acc_o); i += 2) {
      *reinterpret_cast<__nv_bfloat162*>(&tOsO(i)) = __floats2bfloat162_rn(acc_o(i), acc_o(i + 1));
    }
    gpu::named_barrier_sync(128, AttnNamedBarrier::kA2AStage0, wg);

    const int row0 = tile.m_block * kBlockM + wg * kRowsPerWg;
    const int head = p.head_offset + tile.head;
    CUTE_UNROLL
    for (int k = 0; k < kRowsPerWg * kVecPerRow / 128; ++k) {
      const int v = k * 128 + t;
      const int r = v / kVecPerRow;
      const int chunk = v % kVecPerRow;
      const int i = row0 + r;  // the kernel's query row; the sequence row is rotated (see a2a_params.hpp)
      if (i < p.seq) {
        const A2ARowOwner o = a2a_row_owner(a2a_sequence_row(i, p.row_rotation, p.seq), p.shard_len);
        const uint4 val = *reinterpret_cast<const uint4*>(&smem.stage[(wg * kRowsPerWg + r) * kPitch + chunk * 8]);
        Element* base = static_cast<Element*>(p.dst[o.owner]);
        *reinterpret_cast<uint4*>(base + (int64_t(o.local_row) * p.heads_total + head) * kHeadDim + chunk * 8) = val;
      }
    }
    if constexpr (kCompletionCoupled) gpu::fence_sc_sys();
    // The staging rows are rewritten by the next tile; and, coupled, the half tile is complete here.
    gpu::named_barrier_sync(128, AttnNamedBarrier::kA2AStage0, wg);
    arrive_if_last_tile(last_of_cta);
  }

  static CUTE_DEVICE void finish(Params const&, SharedStorage&, int) {}

  // The producer's TMA warp, after its last load: wait for every consumer's arrival, then one thread
  // publishes this CTA's flag to every owner (system-scope release: docs/memory_ordering.md,
  // Publishing). Done here rather than in a consumer so the consumers' register allocation is the local
  // epilogue's (a publish loop after the consumer loop made ptxas spill and serialize wgmma).
  static CUTE_DEVICE void producer_finish(Params const& p, SharedStorage&) {
    gpu::named_barrier_sync(Traits::kNumMmaThreads + 32, AttnNamedBarrier::kA2AFinish);
    if (cute::elect_one_sync()) a2a_publish_cta_flags(p, int(blockIdx.x));
  }
};

}  // namespace xstage::attn
