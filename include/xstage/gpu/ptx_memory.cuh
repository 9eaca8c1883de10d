// Inline PTX for global-memory flags, counters, loads, stores and fences: the operations CUDA C++ has
// no exact spelling for (scope and semantics qualifiers, cache operators, proxy fences). Every wrapper
// is asm volatile with a "memory" clobber where it orders other memory operations, so the compiler
// neither moves ordinary loads and stores across it nor removes it. The protocol these build is stated
// in docs/memory_ordering.md.
#pragma once

#include <cstdint>

namespace xstage::gpu {

// --- 32-bit flags and counters ----------------------------------------------------------------------

// st.release.sys: every store this thread made (and, after a CTA barrier, every store of the CTA that
// the barrier ordered before it) is visible system-wide before the flag value is
// (docs/memory_ordering.md, "Publishing").
__device__ __forceinline__ void publish_flag_release(std::uint32_t* flag, std::uint32_t value) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(flag), "r"(value) : "memory");
}

__device__ __forceinline__ std::uint32_t load_flag_acquire(const std::uint32_t* flag) {
  std::uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(flag) : "memory");
  return v;
}

// Device-scope arrival counter for grid barriers within one GPU (red.release.gpu).
__device__ __forceinline__ void arrive_counter_release_gpu(std::uint32_t* counter, std::uint32_t inc) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(counter), "r"(inc) : "memory");
}

__device__ __forceinline__ std::uint32_t load_counter_acquire_gpu(const std::uint32_t* counter) {
  std::uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(counter) : "memory");
  return v;
}

// --- 64-bit counters and relaxed data loads ----------------------------------------------------------

// System-scope arrival on a (possibly peer) 64-bit counter, releasing this thread's earlier stores.
__device__ __forceinline__ void red_release_sys_add_u64(std::uint64_t* p, std::uint64_t v) {
  asm volatile("red.release.sys.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ std::uint64_t ld_acquire_sys_u64(const std::uint64_t* p) {
  std::uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
// Data that peers write before a release this thread has already acquired: relaxed, never cached stale.
__device__ __forceinline__ int ld_relaxed_sys_s32(const int* p) {
  int v;
  asm volatile("ld.relaxed.sys.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Weak, L1-cached loads (ld.global.ca) of data written during the kernel by other threads, CTAs or GPUs,
// for readers ordered after those writes by a chain that ends in an acquire at gpu or sys scope made on
// this SM: in the PTX memory model the chain makes the writes visible to the weak load, and the acquire
// drops the SM's L1 lines, so later hits are current (docs/memory_ordering.md, "Reading after an
// acquire"). For data read again k-step after k-step, where an L2 round trip per load stalls the
// mainloop (docs/moe_notes.md, "L1-cached loads"). volatile, without a memory clobber: never moved
// above the wait that orders it, yet free to be scheduled among the GMMA work around it.
__device__ __forceinline__ float ld_after_acquire_f32(const float* p) {
  float v;
  asm volatile("ld.global.ca.f32 %0, [%1];" : "=f"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ int ld_after_acquire_s32(const int* p) {
  int v;
  asm volatile("ld.global.ca.s32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}

// --- Plain stores of an exact width -------------------------------------------------------------------

// Weak global stores of exactly 16, 8 or 4 bytes (the address may be a peer mapping: the hardware routes
// it over NVLink). asm, not C++ stores, so the compiler can neither merge nor split them: the probe
// measures stores of the width it asks for.
__device__ __forceinline__ void st_global_v4_u32(void* p, std::uint32_t a, std::uint32_t b, std::uint32_t c,
                                                 std::uint32_t d) {
  asm volatile("st.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
}
__device__ __forceinline__ void st_global_v2_u32(void* p, std::uint32_t a, std::uint32_t b) {
  asm volatile("st.global.v2.u32 [%0], {%1,%2};" ::"l"(p), "r"(a), "r"(b) : "memory");
}
__device__ __forceinline__ void st_global_u32(void* p, std::uint32_t a) {
  asm volatile("st.global.u32 [%0], %1;" ::"l"(p), "r"(a) : "memory");
}

// --- Fences ---------------------------------------------------------------------------------------------

// Generic-proxy writes to shared memory made visible to the async proxy (TMA, wgmma operand reads).
__device__ __forceinline__ void fence_proxy_async_shared_cta() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Generic-proxy global writes (plain or peer stores) ordered before later async-proxy (TMA) reads of
// them; on the writer side, async-proxy bulk writes ordered before a generic-proxy flag release.
__device__ __forceinline__ void fence_proxy_async_global() { asm volatile("fence.proxy.async.global;" ::: "memory"); }

// Waits until this thread's earlier stores are performed system-wide (they have left the X-Stage).
__device__ __forceinline__ void fence_acq_rel_sys() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }

}  // namespace xstage::gpu
