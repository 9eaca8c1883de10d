// Tile traces of the fused MoE kernel's consumers: per CTA, one MoeFusedTileTrace per computed tile
// (%globaltimer stamps by consumer thread 0), in builds configured with XSTAGE_MOE_TRACE (which defines
// XSTAGE_MOE_FUSED_TRACE). Other builds get the same interface as no-ops, so the consumer role reads
// the same either way and its untraced code holds no trace state.
#pragma once

#include <cstddef>
#include <cstdint>

#include "moe_fused_kernel.hpp"
#include "xstage/gpu/timer.cuh"
#include "xstage/sched/moe_schedule.hpp"

namespace xstage::moe::fused_detail {

#if defined(XSTAGE_MOE_FUSED_TRACE)
struct MoeTileTracer {
  const MoeFusedKernelParams& p;
  int mma_thread_idx;
  std::uint32_t traced = 0;  // records written by this CTA (at most p.trace.capacity)
  MoeFusedTileTrace rec{};

  // The consumers reach `tile`.
  __device__ __forceinline__ void begin(const sched::MoeTile& tile) {
    if (mma_thread_idx == 0) {
      rec = MoeFusedTileTrace{};
      rec.stage = std::uint32_t(tile.stage);
      rec.row = tile.row;
      rec.n = tile.n;
      rec.t_entry = gpu::globaltimer_ns();
    }
  }
  // The tile's epilogue is done: its record is written.
  __device__ __forceinline__ void end() {
    if (mma_thread_idx == 0 && p.trace.records != nullptr && traced < std::uint32_t(p.trace.capacity)) {
      p.trace.records[std::size_t(blockIdx.x) * p.trace.capacity + traced] = rec;
      ++traced;
    }
  }
  // Where the mainloop stamps the first k-step's operands, and the Combine epilogue its stores; null
  // when the launch traces nothing.
  __device__ __forceinline__ std::uint64_t* first_stage() {
    return p.trace.records != nullptr ? &rec.t_first_stage : nullptr;
  }
  __device__ __forceinline__ std::uint64_t* store() {
    return p.trace.records != nullptr ? &rec.t_store_begin : nullptr;
  }
  // After the last tile: the CTA's record count.
  __device__ __forceinline__ void finish() {
    if (mma_thread_idx == 0 && p.trace.counts != nullptr) p.trace.counts[blockIdx.x] = traced;
  }
};
#else
struct MoeTileTracer {
  __device__ __forceinline__ MoeTileTracer(const MoeFusedKernelParams&, int) {}
  __device__ __forceinline__ void begin(const sched::MoeTile&) {}
  __device__ __forceinline__ void end() {}
  __device__ __forceinline__ std::uint64_t* first_stage() { return nullptr; }
  __device__ __forceinline__ std::uint64_t* store() { return nullptr; }
  __device__ __forceinline__ void finish() {}
};
#endif

}  // namespace xstage::moe::fused_detail
