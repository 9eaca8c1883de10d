// cuBLAS and cuBLASLt, loaded on first use: the separate-kernel MoE baseline (moe_baseline*.{hpp,cpp}) is the
// only user, a benchmark, so neither the CLI library nor the GPU tests carry a link-time dependency on the two
// libraries (libcublasLt.so.13 alone is about 540 MB; the wheel makes them the optional extra `xstage[bench]`).
// The headers give the types only; every call goes through the table of cublas().
//
// The libraries are opened by soname (dlopen, RTLD_NOW | RTLD_GLOBAL), so a copy already loaded in the process
// (torch's, or the nvidia-cublas wheel's that python/xstage/_native.py preloads) is the one used; otherwise the
// loader's search path (LD_LIBRARY_PATH, the system's) finds them. They are never closed.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>

#include "xstage/gpu/check.hpp"

namespace xstage::testing {

// The sonames the MoE baseline needs (CUDA 13).
inline constexpr const char* kCublasSoname = "libcublas.so.13";
inline constexpr const char* kCublasLtSoname = "libcublasLt.so.13";

// cuBLAS or cuBLASLt could not be loaded, or lacks a function the baseline calls: the message names the library
// (or the function and the library) and how to install it. A DeviceError, so the CLI reports it in one line.
class CublasUnavailable : public gpu::DeviceError {
 public:
  using gpu::DeviceError::DeviceError;
};

// The cuBLAS / cuBLASLt functions the MoE baseline calls (cublas_v2.h's names map cublasCreate, cublasDestroy
// and cublasSetStream to their _v2 symbols; the table resolves those).
struct CublasApi {
  decltype(&::cublasCreate_v2) create = nullptr;
  decltype(&::cublasDestroy_v2) destroy = nullptr;
  decltype(&::cublasSetStream_v2) set_stream = nullptr;
  // cublasGemmEx written out: C++ sees a second, inline overload (cudaDataType compute type) in cublas_api.h.
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                            const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                            cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  decltype(&::cublasGemmGroupedBatchedEx) gemm_grouped_batched_ex = nullptr;
  decltype(&::cublasGetStatusName) get_status_name = nullptr;
  decltype(&::cublasGetStatusString) get_status_string = nullptr;
  decltype(&::cublasLtCreate) lt_create = nullptr;
  decltype(&::cublasLtDestroy) lt_destroy = nullptr;
  decltype(&::cublasLtMatmul) lt_matmul = nullptr;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) lt_matmul_algo_get_heuristic = nullptr;
  decltype(&::cublasLtMatmulDescCreate) lt_matmul_desc_create = nullptr;
  decltype(&::cublasLtMatmulDescDestroy) lt_matmul_desc_destroy = nullptr;
  decltype(&::cublasLtMatmulDescSetAttribute) lt_matmul_desc_set_attribute = nullptr;
  decltype(&::cublasLtMatmulPreferenceCreate) lt_matmul_preference_create = nullptr;
  decltype(&::cublasLtMatmulPreferenceDestroy) lt_matmul_preference_destroy = nullptr;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) lt_matmul_preference_set_attribute = nullptr;
  decltype(&::cublasLtMatrixLayoutCreate) lt_matrix_layout_create = nullptr;
  decltype(&::cublasLtMatrixLayoutDestroy) lt_matrix_layout_destroy = nullptr;
};

// The table over kCublasSoname / kCublasLtSoname, loaded once per process (thread-safe). Throws
// CublasUnavailable, the same message on every call, when loading failed.
const CublasApi& cublas();

// Opens the two libraries by the names given (a soname or a path) and resolves every function of CublasApi, no
// caching: cublas()'s loader, and the tests' way to ask for a library that is not there. Throws
// CublasUnavailable naming the library (or the function) that is missing.
CublasApi load_cublas(const char* cublas_name, const char* cublaslt_name);

}  // namespace xstage::testing
