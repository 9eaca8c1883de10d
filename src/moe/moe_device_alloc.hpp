// Device allocation of the MoE layers' buffers (the fused launch path's work buffers, the bench layers').
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>

#include "xstage/gpu/check.hpp"

namespace xstage::moe {

// cudaMalloc of count elements (at least one) on the current device, zero-filled.
template <typename T>
T* device_alloc_zeroed(size_t count) {
  void* p = nullptr;
  XSTAGE_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(1, count) * sizeof(T)));
  XSTAGE_CUDA_CHECK(cudaMemset(p, 0, std::max<size_t>(1, count) * sizeof(T)));
  return static_cast<T*>(p);
}

}  // namespace xstage::moe
