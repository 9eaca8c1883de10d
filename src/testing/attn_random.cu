// Device-side random bf16 inputs: large benchmark tensors are filled on the GPU (a counter-based hash,
// so any seed gives fresh, reproducible data without a host round trip).
#include "xstage/testing/attn_random.hpp"

#include <cuda_bf16.h>

#include <cstdint>

namespace xstage::attn {
namespace {

__device__ __forceinline__ uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__global__ void fill_normal_bf16_kernel(__nv_bfloat16* dst, size_t n, uint64_t seed, float stddev) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const uint64_t h = splitmix64(seed ^ splitmix64(i));
    // Box-Muller on two 24-bit uniforms in (0, 1].
    const float u1 = (float((h >> 40) & 0xffffff) + 1.f) * (1.f / 16777216.f);
    const float u2 = float((h >> 16) & 0xffffff) * (1.f / 16777216.f);
    const float z = sqrtf(-2.f * logf(u1)) * cospif(2.f * u2);
    dst[i] = __float2bfloat16(z * stddev);
  }
}

}  // namespace

cudaError_t attn_fill_normal_bf16(void* dst, size_t n, uint64_t seed, float stddev, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const int threads = 256;
  const size_t blocks_needed = (n + threads - 1) / threads;
  const int blocks = int(blocks_needed < 4096 ? blocks_needed : 4096);
  fill_normal_bf16_kernel<<<blocks, threads, 0, stream>>>(static_cast<__nv_bfloat16*>(dst), n, seed, stddev);
  return cudaGetLastError();
}

}  // namespace xstage::attn
