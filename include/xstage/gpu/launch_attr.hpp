// Kernel attributes that must be set before a launch, set once per kernel and device.
#pragma once

#include <mutex>
#include <utility>

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

// A launch configuration of `grid` CTAs in clusters of cluster_x x 1 x 1; `attr` holds its one attribute
// and must outlive the configuration's use.
inline cudaLaunchConfig_t cluster_launch_config(int grid, int threads, int smem_bytes, int cluster_x,
                                                cudaStream_t stream, cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(unsigned(grid));
  cfg.blockDim = dim3(unsigned(threads));
  cfg.dynamicSmemBytes = size_t(smem_bytes);
  cfg.stream = stream;
  *attr = cudaLaunchAttribute{};
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = unsigned(cluster_x);
  attr->val.clusterDim.y = 1;
  attr->val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

// Clusters of `cluster_x` x 1 x 1 CTAs of kKernel (threads per CTA, dynamic shared memory) that `device`
// (the current device) holds at once (cudaOccupancyMaxActiveClusters), queried once per (kernel, device):
// a persistent grid of more would run its last clusters after the first ones. Call after
// set_max_dynamic_shared_memory_once. 0 when the query fails.
template <auto kKernel>
int max_active_clusters_once(int device, int cluster_x, int threads, int smem_bytes) {
  static std::once_flag once[64];
  static int result[64] = {};
  const int slot = device % 64;
  std::call_once(once[slot], [&] {
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) return;
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg =
        cluster_launch_config(sms / cluster_x * cluster_x, threads, smem_bytes, cluster_x, nullptr, &attr);
    int clusters = 0;
    if (cudaOccupancyMaxActiveClusters(&clusters, kKernel, &cfg) == cudaSuccess) result[slot] = clusters;
  });
  return result[slot];
}

// Launches kKernel in clusters of cluster_x x 1 x 1 CTAs (grid a multiple of cluster_x).
template <class... Params, class... Args>
cudaError_t launch_clustered(void (*kernel)(Params...), int grid, int threads, int smem_bytes, int cluster_x,
                             cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = cluster_launch_config(grid, threads, smem_bytes, cluster_x, stream, &attr);
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

}  // namespace xstage::gpu
