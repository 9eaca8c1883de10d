#include "cli_gpu.hpp"

#include <cuda_runtime_api.h>

#include "xstage/model/error.hpp"

namespace xstage::cli {

void require_cuda_devices(const std::string& command, const std::vector<int>& devices) {
  std::string list;
  for (int d : devices) {
    if (!list.empty()) list += ',';
    list += std::to_string(d);
  }
  const std::string what = command + ": no usable CUDA device" + (devices.size() > 1 ? "s " : " ") + list;
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky error for an in-process caller
    throw InputError(what + " (cudaGetDeviceCount: " + cudaGetErrorString(rc) + ")");
  }
  for (int d : devices)
    if (d < 0 || d >= count)
      throw InputError(what + " (cudaGetDeviceCount: " + std::to_string(count) + " device" + (count == 1 ? "" : "s") +
                       ", ordinal " + std::to_string(d) + " asked for)");
}

}  // namespace xstage::cli
