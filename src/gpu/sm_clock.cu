// SM clock measurement: clock64 cycles over %globaltimer nanoseconds in one ~1 ms spin.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "xstage/gpu/check.hpp"
#include "xstage/gpu/provenance.hpp"
#include "xstage/gpu/timer.cuh"

namespace xstage::gpu {
namespace {

__global__ void sm_clock_kernel(std::uint64_t spin_ns, unsigned long long* out) {
  const std::uint64_t t0 = globaltimer_ns();
  const std::uint64_t c0 = sm_cycles();
  std::uint64_t t1 = t0;
  while (t1 - t0 < spin_ns) t1 = globaltimer_ns();
  const std::uint64_t c1 = sm_cycles();
  out[0] = t1 - t0;
  out[1] = c1 - c0;
}

}  // namespace

double measure_sm_clock_mhz(int device) {
  int prev = 0;
  XSTAGE_CUDA_CHECK(cudaGetDevice(&prev));
  XSTAGE_CUDA_CHECK(cudaSetDevice(device));
  unsigned long long* d_out = nullptr;
  XSTAGE_CUDA_CHECK(cudaMalloc(&d_out, 2 * sizeof(unsigned long long)));
  std::vector<double> mhz;
  // First launch is a warm-up (module load, clocks ramping from idle); it is not counted.
  for (int i = 0; i < 6; ++i) {
    sm_clock_kernel<<<1, 1>>>(1'000'000, d_out);
    XSTAGE_CUDA_CHECK_LAUNCH();
    unsigned long long h[2] = {0, 0};
    XSTAGE_CUDA_CHECK(cudaMemcpy(h, d_out, sizeof(h), cudaMemcpyDeviceToHost));
    if (i > 0 && h[0] > 0) mhz.push_back(static_cast<double>(h[1]) / static_cast<double>(h[0]) * 1e3);
  }
  XSTAGE_CUDA_CHECK(cudaFree(d_out));
  XSTAGE_CUDA_CHECK(cudaSetDevice(prev));
  if (mhz.empty()) return 0.0;
  std::sort(mhz.begin(), mhz.end());
  return mhz[mhz.size() / 2];
}

}  // namespace xstage::gpu
