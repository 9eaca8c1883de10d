// The Linear-1 hand-off of the fused MoE kernel: one protocol object used by both of its sides, the way
// a CUTLASS pipeline packages its barriers (producer_acquire / producer_commit, consumer_wait /
// consumer_release over a pipeline state).
//   Producers: the consumer warps (kNumMmaThreads / 32 of them). After a Linear-1 tile's SwiGLU rows are
//     stored (and fenced for the async proxy), each warp hands the tile over with one arrival.
//   Consumer: the releaser lane (dispatch warp 3, lane 0). Once every consumer warp has handed a tile
//     over it publishes l1_done[row] += 1 (red.release.gpu) and frees the slot.
// Why a hand-off at all: the release at gpu scope waits (MEMBAR.GPU) for the SM's outstanding stores, the
// SwiGLU rows and any Combine stores still in flight; in the releaser warp that wait stalls no GMMA.
// The state is the number n of Linear-1 tiles handed over so far on this CTA (both sides count the same
// tiles, in the same order): slot n & 1, phase parity (n >> 1) & 1 of that slot's barriers. Two slots,
// so the consumers may run one Linear-1 tile ahead of the releaser and no further.
// Invariants: slot b's full barrier (full[b]) completes a phase once all consumer
// warps have arrived; its empty barrier (empty[b]) once the releaser has published that tile; the
// consumers reuse slot b for tile n + 2 only after the empty barrier's phase for tile n has completed.
#pragma once

#include <cstdint>

#include <cutlass/arch/barrier.h>

#include "moe_fused_kernel.hpp"
#include "moe_fused_sync.cuh"
#include "xstage/gpu/ptx_mbarrier.cuh"

namespace xstage::moe {

// The hand-off's barriers live in the object, and the object in shared memory (SharedStorage::l1_handoff,
// the way a CUTLASS pipeline's SharedStorage holds its barriers): both sides call its methods on that one
// instance, so every barrier address is a fixed offset into shared memory.
struct MoeL1Handoff {
  alignas(8) std::uint64_t full[2];   // consumer warps -> releaser: the tile's rows are stored
  alignas(8) std::uint64_t empty[2];  // releaser -> consumer warps: the tile is published, the slot is free

  // One thread, before the cluster barrier that follows barrier initialization.
  __device__ __forceinline__ void init(std::uint32_t producer_warps) {
    for (int b = 0; b < 2; ++b) {
      cutlass::arch::ClusterBarrier::init(&full[b], producer_warps);
      cutlass::arch::ClusterBarrier::init(&empty[b], 1);
    }
  }

  // Where tile n goes: slot n & 1, its use count n >> 1 (whose parity is the slot's phase).
  struct State {
    std::uint32_t slot, use;
  };
  __device__ __forceinline__ static State state(std::uint32_t n) { return State{n & 1, n >> 1}; }

  // Consumer warps, before handing over a tile: the slot's previous tile (two before) has been
  // published. index: the tile's row block (failure record).
  __device__ __forceinline__ void producer_acquire(State s, MoeFusedKernelParams const& p, std::uint32_t index) const {
    if (s.use > 0)
      moe_wait_phase(&empty[s.slot], (s.use - 1) & 1, p.sync.timeout_ns, p.sync.failure, kMoeWaitL1Published,
                     p.shape.rank, index);
  }
  // Consumer warps: the tile is handed over, one arrival per warp after all its lanes' stores (whole warp
  // calls).
  __device__ __forceinline__ void producer_commit(State s, int mma_thread_idx) const {
    __syncwarp();
    if (mma_thread_idx % 32 == 0) gpu::mbar_arrive_cta(&full[s.slot]);
  }

  // Releaser: whether tile n has been handed over (nonzero), answered at once (mbarrier.test_wait; the
  // releaser has dispatch rows to copy in between).
  __device__ __forceinline__ std::uint32_t consumer_test(std::uint32_t n) const {
    return gpu::mbar_try_wait_parity_acquire_cluster</*kNeverSuspend=*/true>(&full[n & 1], (n >> 1) & 1);
  }
  // Releaser: bounded wait for tile n's hand-over (index: its row block, failure record). `n` by reference:
  // the poll reads the releaser's count itself (docs/moe_notes.md, "Fused kernel structure").
  __device__ __forceinline__ void consumer_wait(const std::uint32_t& n, MoeFusedKernelParams const& p,
                                                std::uint32_t index) const {
    const std::uint64_t* handed = &full[n & 1];
    moe_wait_geq([&] { return std::uint64_t(gpu::mbar_try_wait_parity_acquire_cluster(handed, (n >> 1) & 1)); }, 1,
                 p.sync.timeout_ns, p.sync.failure, kMoeWaitL1Handoff, p.shape.rank, index);
  }
  // Releaser: tile n is published; its slot may take tile n + 2.
  __device__ __forceinline__ void consumer_release(std::uint32_t n) { gpu::mbar_arrive_cta(&empty[n & 1]); }
};

}  // namespace xstage::moe
