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
// Store path: TMA bulk stores, no named barrier per tile. In the wgmma m64 accumulator layout warp w of
// the consumer warps holds tile rows [16w, 16w + 16), so each warp stages only its own 16 rows in a
// padded shared-memory buffer (rows padded by 16 bytes: the fragment's bf16x2 writes hit 32 distinct
// banks and each row's 256 bytes stay contiguous), fence.proxy.async.shared::cta + __syncwarp, then
// lanes 0..15 each issue one 256-byte cp.async.bulk.global.shared::cta of their row to the row's owner
// (rows past seq skipped; a tile that straddles two owners is handled per row) and commit a bulk group.
// The copy engine reads shared memory and writes the owner's memory while the warp returns to the
// mainloop. Before the next tile overwrites the staging rows each lane waits with
// cp.async.bulk.wait_group.read 0 (shared-memory reads done; not remote completion).
//
// Completion. Piggyback (kCompletionCoupled = false): no per-tile wait. Once per CTA, on the last tile,
// the issuing lanes wait with cp.async.bulk.wait_group 0 (the bulk writes are complete and visible to
// the issuing thread), then fence.proxy.async.global: the payload was written through the async proxy
// and the flag is a generic-proxy release, and the PTX memory model orders operations of different
// proxies only through a proxy fence; with it, the async writes precede the thread's bar.arrive at the
// named barrier that the producer's TMA warp waits on, whose bar.sync and st.release.sys (cumulative)
// extend them to the owner: one thread publishes flags[p][rank * kMaxCtas + cta] = epoch + 1 to every
// rank p (docs/memory_ordering.md, Publishing and Async proxy). The reader (a2a_wait, the next kernel
// on the owner's stream) acquires all of them first.
//
// Completion-coupled (kCompletionCoupled = true, the paper's counterfactual, like for like with the
// piggyback epilogue): every tile ends with cp.async.bulk.wait_group 0 (this warp's rows remotely
// complete) + __syncwarp before the warp returns to the mainloop. The final flags are published as
// above.
#pragma once

#include <cstdint>

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

template <class Traits, bool kCompletionCoupled>
struct AttnEpilogueA2A {
  using Element = typename Traits::Element;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kHeadDim = Traits::kHeadDim;
  static constexpr int kPitch = kHeadDim + 8;  // elements; 16-byte pad per row

  using Params = A2AEpilogueParams;
  struct SharedStorage {
    alignas(16) __nv_bfloat16 stage[kBlockM * kPitch];
  };

  template <class TiledMmaPV, class TensorO, class RowLse>
  static CUTE_DEVICE void store(Params const& p, SharedStorage& smem, sched::AttnTile const& tile, bool last_of_cta,
                                TensorO const& acc_o, RowLse const&, int mma_thread_idx) {
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
      // Last tile: writes complete, then ordered before the generic-proxy flag release (see top). The
      // arrive sits in the last tile's epilogue, not in finish(): after the consumer loop it made ptxas
      // spill and serialize wgmma.
      gpu::bulk_wait_all();
      gpu::fence_proxy_async_global();
      __syncwarp();
      gpu::named_barrier_arrive(Traits::kNumMmaThreads + 32, AttnNamedBarrier::kA2AFinish);
    }
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
