// The bits of a float and back, on the host (memcpy) and on the device (the reinterpret intrinsics):
// pure, for the numerics headers that the kernels and the CPU tests share.
#pragma once

#include <cstdint>
#include <cstring>

#include "xstage/gpu/host_device.hpp"

namespace xstage::gpu {

XSTAGE_HOST_DEVICE_INLINE std::uint32_t float_bits(float v) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(v);
#else
  std::uint32_t u;
  std::memcpy(&u, &v, sizeof(u));
  return u;
#endif
}

XSTAGE_HOST_DEVICE_INLINE float float_of_bits(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float v;
  std::memcpy(&v, &u, sizeof(v));
  return v;
#endif
}

}  // namespace xstage::gpu
