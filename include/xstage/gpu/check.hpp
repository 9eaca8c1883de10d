// Error checks for CUDA runtime and NCCL calls: every call is wrapped so a failure reports the
// expression, the file and the line, and surfaces as an exception the CLI prints in one line.
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

#if __has_include(<nccl.h>)
#include <nccl.h>
#define XSTAGE_HAVE_NCCL_HEADER 1
#endif

namespace xstage::gpu {

// A failed CUDA or NCCL call. Distinct from xstage::InputError: this is the machine's fault or ours,
// not the user's input.
class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line) {
  throw DeviceError(std::string(file) + ":" + std::to_string(line) + ": " + expr + " failed: " +
                    cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

#ifdef XSTAGE_HAVE_NCCL_HEADER
[[noreturn]] inline void throw_nccl_error(ncclResult_t res, const char* expr, const char* file, int line) {
  // ncclGetLastError names the cause (e.g. which peer, which resource) where NCCL knows it.
  const char* last = ncclGetLastError(nullptr);
  throw DeviceError(std::string(file) + ":" + std::to_string(line) + ": " + expr + " failed: " +
                    ncclGetErrorString(res) + (last && *last ? std::string(" — ") + last : std::string()));
}
#endif

}  // namespace xstage::gpu

#define XSTAGE_CUDA_CHECK(expr)                                                 \
  do {                                                                          \
    const cudaError_t xstage_cuda_err_ = (expr);                                \
    if (xstage_cuda_err_ != cudaSuccess)                                        \
      ::xstage::gpu::throw_cuda_error(xstage_cuda_err_, #expr, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: catches launch-configuration errors at once (not the kernel's own faults,
// which surface at the next synchronising call, itself checked).
#define XSTAGE_CUDA_CHECK_LAUNCH() XSTAGE_CUDA_CHECK(cudaGetLastError())

#ifdef XSTAGE_HAVE_NCCL_HEADER
#define XSTAGE_NCCL_CHECK(expr)                                                 \
  do {                                                                          \
    const ncclResult_t xstage_nccl_res_ = (expr);                               \
    if (xstage_nccl_res_ != ncclSuccess && xstage_nccl_res_ != ncclInProgress)  \
      ::xstage::gpu::throw_nccl_error(xstage_nccl_res_, #expr, __FILE__, __LINE__); \
  } while (0)
#endif
