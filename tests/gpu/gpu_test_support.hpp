// Shared by the GPU test files: how many CUDA devices are present, and skipping a test that needs more.
#pragma once

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

}  // namespace xstage::test

#define REQUIRE_GPUS(n)                                                                           \
  do {                                                                                            \
    if (::xstage::test::device_count() < (n))                                                     \
      GTEST_SKIP() << "needs " << (n) << " GPU(s), " << ::xstage::test::device_count() << " present"; \
  } while (0)
