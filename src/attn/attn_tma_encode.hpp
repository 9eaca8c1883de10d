// Host-side TMA descriptor encoding for the CuTe launchers (attention, fused MoE), included (compiler
// -include, see src/attn/CMakeLists.txt) ahead of every CUTLASS header. Every library of one process
// that instantiates CuTe's make_tma_copy must use it: cutlass::call_cuTensorMapEncodeTiled is one
// template, and two bodies of it in one link would be an ODR violation.
//
// CuTe's make_tma_copy encodes each descriptor through cutlass::call_cuTensorMapEncodeTiled, which by
// default looks the driver entry point up (cudaGetDriverEntryPointByVersion, a by-name search) on every
// call: three lookups per attention launch. Linking the driver directly
// (CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL with CUDA::cuda_driver) would make libxstage_capi.so
// unloadable on machines without a driver, where the Python package must still import and check its
// arguments. Instead the direct-call mode is enabled with the driver function's name mapped to
// encode_tma_tiled, which looks the entry point up once per process and then calls it.
// Exactly what the default mode does per call otherwise: same entry point, same version (12000).
#pragma once

#if defined(CUTLASS_CUDA_DRIVER_WRAPPER_CALL)
#error "attn_tma_encode.hpp must be included before any CUTLASS header (see src/attn/CMakeLists.txt)"
#endif

#include <atomic>

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

namespace xstage::attn {

// cuTensorMapEncodeTiled (driver API 12.0 signature) through an entry point looked up once.
// CUDA_ERROR_UNKNOWN when the driver offers no such entry point (the lookup is retried next call).
inline CUresult encode_tma_tiled(CUtensorMap* tensor_map, CUtensorMapDataType data_type, cuuint32_t rank, void* global_address,
                          const cuuint64_t* global_dim, const cuuint64_t* global_strides, const cuuint32_t* box_dim,
                          const cuuint32_t* element_strides, CUtensorMapInterleave interleave,
                          CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2_promotion,
                          CUtensorMapFloatOOBfill oob_fill) {
  // Inline: one definition (and one cached pointer) for every library compiled with this header.
  // The entry point of a loaded driver never changes; racing first callers store the same pointer.
  static std::atomic<PFN_cuTensorMapEncodeTiled_v12000> cached{nullptr};
  PFN_cuTensorMapEncodeTiled_v12000 fn = cached.load(std::memory_order_acquire);
  if (!fn) {
    void* pfn = nullptr;
    cudaDriverEntryPointQueryResult query = cudaDriverEntryPointSymbolNotFound;
    const cudaError_t e =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &pfn, 12000, cudaEnableDefault, &query);
    if (e != cudaSuccess || query != cudaDriverEntryPointSuccess || !pfn) return CUDA_ERROR_UNKNOWN;
    fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(pfn);
    cached.store(fn, std::memory_order_release);
  }
  return fn(tensor_map, data_type, rank, global_address, global_dim, global_strides, box_dim, element_strides,
            interleave, swizzle, l2_promotion, oob_fill);
}

}  // namespace xstage::attn

#define XSTAGE_ATTN_TMA_ENCODE_CACHED 1
#define CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL 1
// In cuda_host_adapter.hpp's direct mode the wrapper body is `return func(args...)`: only that use is
// renamed (the `call_##func` and `PFN_##func` pastes do not expand macros).
#define cuTensorMapEncodeTiled ::xstage::attn::encode_tma_tiled
