// The named barriers (bar.sync / bar.arrive ids) of the attention forward kernel: one list for the
// mainloop and every epilogue, so that no two uses share an id by accident (gpu::named_barrier_sync).
#pragma once

#include <cstdint>

#include "xstage/gpu/named_barrier.cuh"

namespace xstage::attn {

enum class AttnNamedBarrier : uint32_t {
  kWgOrder0 = 0,   // + consumer warpgroup i: "warpgroup i may issue its GEMMs" (mainloop GEMM turns)
  kWgOrder1 = 1,
  kWgOrder2 = 2,   // (three consumer warpgroups)
  // id 3 is free
  kA2AFinish = 4,  // the A2A epilogue's consumers -> the producer's TMA warp, before the CTA's flags
  kCount
};
static_assert(gpu::kNamedBarriersFit<AttnNamedBarrier>);

}  // namespace xstage::attn
