// What every role of the fused MoE kernel shares: the CTA's shared storage, the pair coordinates of the
// CTA, the tile counts and the row layout that the roles' copies of the scheduler walk.
#pragma once

#include <cstddef>

#include "moe_fused_dispatch.cuh"
#include "moe_fused_kernel.hpp"
#include "moe_fused_mainloop.cuh"
#include "xstage/sched/moe_schedule.hpp"

namespace xstage::moe::fused_detail {

// The releaser lane's walk of the schedule (either order) and its next Linear-1 tile, in shared memory:
// the dispatch loop that the releaser runs in between keeps no schedule state in the producer warps' 40
// registers (held there, the state would push the dispatch loop's own values to local memory).
struct MoeReleaserState {
  static constexpr std::size_t kScheduleBytes = sizeof(sched::InterleavedMoeScheduler) >
                                                        sizeof(sched::ExpertWaveMoeScheduler)
                                                    ? sizeof(sched::InterleavedMoeScheduler)
                                                    : sizeof(sched::ExpertWaveMoeScheduler);
  alignas(8) unsigned char schedule[kScheduleBytes];
  sched::MoeTile tile;
};

template <class T>
struct MoeFusedKernelStorage {
  typename T::SharedStorage main;
  MoeLayoutSmem layout;
  MoeReleaserState releaser;
};

// The CTA in its pair (pair = 2-CTA cluster = scheduler instance; role r takes N-tiles 2j + r of step j).
struct MoePairCoord {
  int instance, instances, role;
};

// Linear-2 N-tiles rounded up to even (CTA pairs); the padding tile of an odd count is loaded (its A half
// is the partner's too) but neither computed nor stored (moe_drain_tile).
__host__ __device__ inline int l2_tiles(int hidden) { return hidden / MoeFusedTraits::kBlockN; }
__host__ __device__ inline int l2_tiles_even(int hidden) { return (l2_tiles(hidden) + 1) / 2 * 2; }
__host__ __device__ inline int l1_tiles(int h_inter) { return h_inter / (MoeFusedTraits::kBlockN / 2); }

// GEMM-only mode (MoeGemmOnly): kLinear1 runs the Linear-1 tiles alone, kLinear2 the Linear-2 tiles.
// What a GEMM-only launch times: count exchange and layout (one flag round trip between the ranks), then
// the scheduler's tiles of that stage with their TMA loads, GMMA mainloop and epilogue (Linear-1: SwiGLU
// into h in local memory and the l1_done increment; Linear-2: the bf16 staging of the accumulator in
// shared memory, no Combine store), then the completion flags.
__host__ __device__ inline bool moe_gemm_only_skips(MoeGemmOnly gemm_only, sched::MoeStage stage) {
  return (gemm_only == MoeGemmOnly::kLinear1 && stage == sched::MoeStage::kLinear2) ||
         (gemm_only == MoeGemmOnly::kLinear2 && stage == sched::MoeStage::kLinear1);
}

// This rank's row blocks per local expert, as the scheduler walks them. Each role computes it in its own
// branch, not before the split: values live across warpgroup_reg_dealloc must fit the producer's 40
// registers, and held from before the split they spill there.
__device__ __forceinline__ sched::MoeRowLayout moe_row_layout(const MoeFusedKernelParams& p, const MoeLayoutSmem& L) {
  const int el = p.shape.experts / p.shape.ranks;
  return sched::MoeRowLayout{&L.offs[p.shape.rank * (el + 1)], el, l1_tiles(p.shape.h_inter) / 2,
                             l2_tiles_even(p.shape.hidden) / 2};
}

}  // namespace xstage::moe::fused_detail
