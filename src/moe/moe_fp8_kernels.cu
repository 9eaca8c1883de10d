#include "moe_fp8_kernels.hpp"

#include "moe_fp8.cuh"

namespace xstage::moe {

namespace {

// One warp per row; each lane quantizes 16 consecutive values per pass (512 per warp pass).
template <int kGroup>
__global__ void quantize_rows_kernel(const std::uint16_t* __restrict__ x, long long rows, int cols,
                                     std::uint8_t* __restrict__ q, float* __restrict__ scales, int scale_pitch) {
  const int lane = threadIdx.x % 32;
  const long long warps = (long long)gridDim.x * (blockDim.x / 32);
  for (long long r = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; r < rows; r += warps) {
    const uint4* src = reinterpret_cast<const uint4*>(x + r * cols);
    fp8_quantize_row<kGroup>(
        lane, cols, [&](int c, uint4& lo, uint4& hi) { lo = src[c / 8], hi = src[c / 8 + 1]; }, q + r * cols,
        scales + r * scale_pitch);
  }
}

// One CTA (256 threads) per 128 x 128 block; each thread takes half a row (64 values).
__global__ void quantize_weight_blocks_kernel(const std::uint16_t* __restrict__ w, int rows, int cols,
                                              std::uint8_t* __restrict__ q, float* __restrict__ scales) {
  const int br = rows / 128, bc = cols / 128;
  const long long m = blockIdx.x / (br * bc);
  const int bi = (blockIdx.x / bc) % br, bj = blockIdx.x % bc;
  const int r = bi * 128 + threadIdx.x / 2, c0 = bj * 128 + (threadIdx.x % 2) * 64;
  const long long off = (m * rows + r) * cols + c0;
  float f[64];
  const uint4* src = reinterpret_cast<const uint4*>(w + off);
#pragma unroll
  for (int i = 0; i < 8; ++i) bf16x8_to_float(src[i], f + 8 * i);
  float amax = 0.f;
#pragma unroll
  for (int i = 0; i < 64; ++i) amax = fmaxf(amax, fabsf(f[i]));
  amax = group_amax<32>(amax);
  __shared__ float warp_max[8];
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = amax;
  __syncthreads();
  amax = warp_max[0];
#pragma unroll
  for (int i = 1; i < 8; ++i) amax = fmaxf(amax, warp_max[i]);
  const float s = fp8_scale_for_amax(amax);
  const float inv = fp8_inverse_scale(s);
  uint4* dst = reinterpret_cast<uint4*>(q + off);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float* g = f + 16 * i;
    dst[i] = make_uint4(e4m3x4(g[0] * inv, g[1] * inv, g[2] * inv, g[3] * inv),
                        e4m3x4(g[4] * inv, g[5] * inv, g[6] * inv, g[7] * inv),
                        e4m3x4(g[8] * inv, g[9] * inv, g[10] * inv, g[11] * inv),
                        e4m3x4(g[12] * inv, g[13] * inv, g[14] * inv, g[15] * inv));
  }
  if (threadIdx.x == 0) scales[(m * br + bi) * bc + bj] = s;
}

}  // namespace

cudaError_t launch_quantize_rows_fp8(const std::uint16_t* x, long long rows, int cols, int group, std::uint8_t* q,
                                     float* scales, int scale_pitch, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if ((group != 64 && group != 128) || cols <= 0 || cols % group != 0 || scale_pitch < cols / group) {
    return cudaErrorInvalidValue;
  }
  const long long want = (rows + 7) / 8;
  const int blocks = int(want < 4096 ? want : 4096);
  if (group == 128) quantize_rows_kernel<128><<<blocks, 256, 0, stream>>>(x, rows, cols, q, scales, scale_pitch);
  else quantize_rows_kernel<64><<<blocks, 256, 0, stream>>>(x, rows, cols, q, scales, scale_pitch);
  return cudaGetLastError();
}

cudaError_t launch_quantize_weight_blocks_fp8(const std::uint16_t* w, int matrices, int rows, int cols,
                                              std::uint8_t* q, float* scales, cudaStream_t stream) {
  if (matrices <= 0) return cudaSuccess;
  if (rows <= 0 || cols <= 0 || rows % 128 != 0 || cols % 128 != 0) return cudaErrorInvalidValue;
  const long long blocks = (long long)matrices * (rows / 128) * (cols / 128);
  if (blocks > 0x7fffffffLL) return cudaErrorInvalidValue;
  quantize_weight_blocks_kernel<<<unsigned(blocks), 256, 0, stream>>>(w, rows, cols, q, scales);
  return cudaGetLastError();
}

}  // namespace xstage::moe
