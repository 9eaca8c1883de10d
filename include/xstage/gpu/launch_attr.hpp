// Kernel attributes that must be set before a launch, set once per kernel and device.
#pragma once

#include <mutex>

#include <cuda_runtime.h>

namespace xstage::gpu {

// Raises kKernel's dynamic shared-memory limit to smem_bytes (cudaFuncAttributeMaxDynamicSharedMemorySize,
// needed above 48 KiB) on `device`, which must be the current device. The attribute belongs to the
// device's context, so it is set once per (kernel, device) (thread-safe: std::call_once) and the first
// call's result is returned to every later one: a launcher checks it before each launch. Devices are told
// apart modulo 64 (more per process are not expected). kKernel: the __global__ function itself (a template
// argument, so every kernel instantiation has its own once-flags even where two share a signature);
// smem_bytes must be the same on every call for one kernel (its compile-time shared-storage size).
template <auto kKernel>
cudaError_t set_max_dynamic_shared_memory_once(int device, int smem_bytes) {
  static std::once_flag once[64];
  static cudaError_t result[64] = {};
  const int slot = device % 64;
  std::call_once(once[slot], [&] {
    result[slot] = cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  });
  return result[slot];
}

}  // namespace xstage::gpu
