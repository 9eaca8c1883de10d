// CUDA error checking for the attention host code: every call reports file and line.
#pragma once

#include <stdexcept>
#include <string>

#include <cuda_runtime_api.h>

namespace xstage::attn {

[[noreturn]] inline void attn_cuda_fail(cudaError_t e, const char* call, const char* file, int line) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " +
                           cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

}  // namespace xstage::attn

#define XSTAGE_ATTN_CUDA_CHECK(call)                                                    \
  do {                                                                                  \
    cudaError_t xstage_attn_err_ = (call);                                              \
    if (xstage_attn_err_ != cudaSuccess)                                                \
      ::xstage::attn::attn_cuda_fail(xstage_attn_err_, #call, __FILE__, __LINE__);      \
  } while (0)
