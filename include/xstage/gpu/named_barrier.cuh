// Named barriers (bar.sync / bar.arrive) addressed by a kernel's own enum of barrier ids, so that one
// list per kernel says which id means what (attn_named_barriers.cuh, moe_fused_sync.cuh). Ids are
// user ids: cutlass::arch::NamedBarrier adds CUTLASS's reserved count itself.
#pragma once

#include <cstdint>
#include <type_traits>

#include <cutlass/arch/barrier.h>

namespace xstage::gpu {

// True when every id of the enum `Ids` (ids 0 .. Ids::kCount - 1) fits the hardware after CUTLASS's.
template <class Ids>
inline constexpr bool kNamedBarriersFit =
    std::uint32_t(Ids::kCount) + cutlass::arch::NamedBarrier::ReservedNamedBarrierCount <=
    cutlass::arch::NamedBarrier::HardwareMaxNumNamedBarriers;

// `threads` threads (a multiple of 32) meet at barrier `id` + `offset` (offset: e.g. the warpgroup index
// for a barrier with one id per warpgroup).
template <class Ids>
__device__ __forceinline__ void named_barrier_sync(std::uint32_t threads, Ids id, int offset = 0) {
  static_assert(std::is_enum_v<Ids> && kNamedBarriersFit<Ids>);
  cutlass::arch::NamedBarrier::sync(threads, std::uint32_t(id) + offset);
}

// Arrives at barrier `id` + `offset` without waiting (orders this thread's earlier memory operations
// before the barrier's completion, for the threads that sync on it).
template <class Ids>
__device__ __forceinline__ void named_barrier_arrive(std::uint32_t threads, Ids id, int offset = 0) {
  static_assert(std::is_enum_v<Ids> && kNamedBarriersFit<Ids>);
  cutlass::arch::NamedBarrier::arrive(threads, std::uint32_t(id) + offset);
}

}  // namespace xstage::gpu
