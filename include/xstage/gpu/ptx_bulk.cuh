// Inline PTX for TMA bulk copies without a tensor map (cp.async.bulk, sm_90): shared::cta -> global
// copies of contiguous rows, grouped per thread into bulk groups.
#pragma once

#include <cstdint>

namespace xstage::gpu {

// One bulk copy of `bytes` (a multiple of 16, both addresses 16-byte aligned) into this thread's open
// bulk group. The copy engine reads shared memory asynchronously: the source must not be rewritten
// before bulk_wait_all_read, and shared-memory writes of the generic proxy must precede the copy
// through fence_proxy_async_shared_cta.
__device__ __forceinline__ void bulk_store_s2g(void* gmem, const void* smem, std::uint32_t bytes) {
  const std::uint32_t s = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(gmem), "r"(s), "r"(bytes)
               : "memory");
}
// Closes this thread's open bulk group.
__device__ __forceinline__ void bulk_commit_group() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// This thread's bulk groups have finished reading shared memory (their global writes may be in flight).
__device__ __forceinline__ void bulk_wait_all_read() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }
// This thread's bulk groups are complete: their global writes are performed.
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

}  // namespace xstage::gpu
