#include "cublas_loader.hpp"

#include <dlfcn.h>

#include <mutex>
#include <string>

namespace xstage::testing {

namespace {

// How to get the libraries, in every message (the CLI prints a failure's first 300 characters: this comes
// before dlerror's text, which is bounded).
constexpr const char* kInstallHint =
    "pip install 'xstage[bench]' (or nvidia-cublas), or put the folder holding it on LD_LIBRARY_PATH";

std::string bounded(const char* text, size_t limit) {
  std::string s = text ? text : "unknown error";
  if (s.size() > limit) s = s.substr(0, limit) + "...";
  return s;
}

void* open_library(const char* name) {
  void* handle = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    throw CublasUnavailable(std::string("the MoE baseline needs cuBLAS (") + name + "): " + kInstallHint +
                            " [dlopen: " + bounded(why, 120) + "]");
  }
  return handle;
}

template <typename Fn>
void resolve(void* handle, const char* library, const char* symbol, Fn& slot) {
  dlerror();  // clear
  void* p = dlsym(handle, symbol);
  if (p == nullptr) {
    throw CublasUnavailable(std::string("the MoE baseline needs cuBLAS 13: ") + library + " has no " + symbol +
                            "; " + kInstallHint);
  }
  slot = reinterpret_cast<Fn>(p);
}

}  // namespace

CublasApi load_cublas(const char* cublas_name, const char* cublaslt_name) {
  // cuBLASLt first: libcublas.so.13 needs it, and finds the copy already loaded by its soname.
  void* lt = open_library(cublaslt_name);
  void* blas = open_library(cublas_name);
  CublasApi api;
  resolve(blas, cublas_name, "cublasCreate_v2", api.create);
  resolve(blas, cublas_name, "cublasDestroy_v2", api.destroy);
  resolve(blas, cublas_name, "cublasSetStream_v2", api.set_stream);
  resolve(blas, cublas_name, "cublasGemmEx", api.gemm_ex);
  resolve(blas, cublas_name, "cublasGemmGroupedBatchedEx", api.gemm_grouped_batched_ex);
  resolve(blas, cublas_name, "cublasGetStatusName", api.get_status_name);
  resolve(blas, cublas_name, "cublasGetStatusString", api.get_status_string);
  resolve(lt, cublaslt_name, "cublasLtCreate", api.lt_create);
  resolve(lt, cublaslt_name, "cublasLtDestroy", api.lt_destroy);
  resolve(lt, cublaslt_name, "cublasLtMatmul", api.lt_matmul);
  resolve(lt, cublaslt_name, "cublasLtMatmulAlgoGetHeuristic", api.lt_matmul_algo_get_heuristic);
  resolve(lt, cublaslt_name, "cublasLtMatmulDescCreate", api.lt_matmul_desc_create);
  resolve(lt, cublaslt_name, "cublasLtMatmulDescDestroy", api.lt_matmul_desc_destroy);
  resolve(lt, cublaslt_name, "cublasLtMatmulDescSetAttribute", api.lt_matmul_desc_set_attribute);
  resolve(lt, cublaslt_name, "cublasLtMatmulPreferenceCreate", api.lt_matmul_preference_create);
  resolve(lt, cublaslt_name, "cublasLtMatmulPreferenceDestroy", api.lt_matmul_preference_destroy);
  resolve(lt, cublaslt_name, "cublasLtMatmulPreferenceSetAttribute", api.lt_matmul_preference_set_attribute);
  resolve(lt, cublaslt_name, "cublasLtMatrixLayoutCreate", api.lt_matrix_layout_create);
  resolve(lt, cublaslt_name, "cublasLtMatrixLayoutDestroy", api.lt_matrix_layout_destroy);
  return api;
}

const CublasApi& cublas() {
  static std::once_flag once;
  static CublasApi api;
  static std::string failure;  // empty once loaded
  std::call_once(once, [] {
    try {
      api = load_cublas(kCublasSoname, kCublasLtSoname);
    } catch (const CublasUnavailable& e) {
      failure = e.what();
    }
  });
  if (!failure.empty()) throw CublasUnavailable(failure);
  return api;
}

}  // namespace xstage::testing
