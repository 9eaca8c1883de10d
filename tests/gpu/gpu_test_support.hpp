// Shared by the GPU test files: how many CUDA devices are present, whether they are sm_90 (the Hopper
// kernels), skipping a test that needs more, and a fresh seed per run.
#pragma once

#include <cstdint>
#include <random>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

namespace xstage::test {

// 0 when no driver or device is present (CI machines): the GPU tests then skip themselves.
inline int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

inline bool is_hopper(int device) {
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  return major == 9 && minor == 0;
}

// Devices 0 .. n-1 are present and all sm_90.
inline bool have_hoppers(int n) {
  if (device_count() < n) return false;
  for (int d = 0; d < n; ++d)
    if (!is_hopper(d)) return false;
  return true;
}

// Fresh inputs each run (the failing seed is printed by the test that uses it).
inline uint64_t fresh_seed() {
  std::random_device rd;
  return (uint64_t(rd()) << 32) ^ rd();
}

}  // namespace xstage::test

#define REQUIRE_GPUS(n)                                                                           \
  do {                                                                                            \
    if (::xstage::test::device_count() < (n))                                                     \
      GTEST_SKIP() << "needs " << (n) << " GPU(s), " << ::xstage::test::device_count() << " present"; \
  } while (0)

#define REQUIRE_HOPPERS(n)                                                                        \
  do {                                                                                            \
    if (!::xstage::test::have_hoppers(n)) GTEST_SKIP() << "needs " << (n) << " sm_90 CUDA device(s)"; \
  } while (0)
