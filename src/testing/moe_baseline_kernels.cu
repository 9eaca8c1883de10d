#include "moe_baseline_kernels.hpp"
#include "moe_fp8.cuh"
#include "xstage/moe/moe_numerics.hpp"

namespace xstage::moe {
namespace {

// One block per row, 16-byte copies.
__global__ void gather_kernel(const uint4* __restrict__ x, const int* __restrict__ token_of_send_row, int vec_per_row,
                              uint4* __restrict__ send) {
  const int row = blockIdx.x;
  const uint4* src = x + size_t(token_of_send_row[row]) * vec_per_row;
  uint4* dst = send + size_t(row) * vec_per_row;
  for (int i = threadIdx.x; i < vec_per_row; i += blockDim.x) dst[i] = src[i];
}

__device__ __forceinline__ float bf16_lo(unsigned w) { return bf16_bits_to_float(std::uint16_t(w & 0xffffu)); }
__device__ __forceinline__ float bf16_hi(unsigned w) { return bf16_bits_to_float(std::uint16_t(w >> 16)); }
__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
  return unsigned(float_to_bf16_bits(lo)) | (unsigned(float_to_bf16_bits(hi)) << 16);
}

// Grid-stride over 8-element groups of the output; gate and up are 16-byte loads.
__global__ void swiglu_kernel(const uint4* __restrict__ h, long long groups, int groups_per_row, uint4* __restrict__ a) {
  for (long long g = blockIdx.x * (long long)blockDim.x + threadIdx.x; g < groups; g += (long long)gridDim.x * blockDim.x) {
    const long long r = g / groups_per_row;
    const int c = int(g % groups_per_row);
    const uint4 gate = h[r * 2 * groups_per_row + c];
    const uint4 up = h[r * 2 * groups_per_row + groups_per_row + c];
    const unsigned gw[4] = {gate.x, gate.y, gate.z, gate.w}, uw[4] = {up.x, up.y, up.z, up.w};
    unsigned out[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      out[i] = pack_bf16(silu(bf16_lo(gw[i])) * bf16_lo(uw[i]), silu(bf16_hi(gw[i])) * bf16_hi(uw[i]));
    }
    a[g] = make_uint4(out[0], out[1], out[2], out[3]);
  }
}

// One block per token; each thread accumulates 8 channels over the token's k rows in routing order.
__global__ void combine_kernel(const uint4* __restrict__ returned, const int* __restrict__ send_row_of_slot,
                               const float* __restrict__ weights, int top_k, int vec_per_row, uint4* __restrict__ y) {
  const int t = blockIdx.x;
  for (int v = threadIdx.x; v < vec_per_row; v += blockDim.x) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int j = 0; j < top_k; ++j) {
      const int slot = t * top_k + j;
      const float w = weights[slot];
      const uint4 q = returned[size_t(send_row_of_slot[slot]) * vec_per_row + v];
      const unsigned qw[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        acc[2 * i] += w * bf16_lo(qw[i]);
        acc[2 * i + 1] += w * bf16_hi(qw[i]);
      }
    }
    y[size_t(t) * vec_per_row + v] =
        make_uint4(pack_bf16(acc[0], acc[1]), pack_bf16(acc[2], acc[3]), pack_bf16(acc[4], acc[5]), pack_bf16(acc[6], acc[7]));
  }
}

__device__ __forceinline__ std::uint64_t splitmix64(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__global__ void fill_uniform_kernel(std::uint16_t* p, std::size_t n, std::uint64_t seed, float scale) {
  for (std::size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const std::uint64_t r = splitmix64(seed * 0x2545f4914f6cdd1dull + i);
    const float u = float(r >> 40) * (1.f / 16777216.f);  // [0, 1)
    p[i] = float_to_bf16_bits((2.f * u - 1.f) * scale);
  }
}

// One block per row: the row's e4m3 bytes (16-byte copies) and its scales.
__global__ void gather_fp8_kernel(const uint4* __restrict__ q, const float* __restrict__ s,
                                  const int* __restrict__ token_of_send_row, int vec_per_row, int scales_per_row,
                                  uint4* __restrict__ send_q, float* __restrict__ send_s) {
  const int row = blockIdx.x;
  const size_t t = size_t(token_of_send_row[row]);
  for (int i = threadIdx.x; i < vec_per_row; i += blockDim.x) send_q[size_t(row) * vec_per_row + i] = q[t * vec_per_row + i];
  for (int i = threadIdx.x; i < scales_per_row; i += blockDim.x) send_s[size_t(row) * scales_per_row + i] = s[t * scales_per_row + i];
}

// One warp per row (fp8_quantize_row, 128-channel groups): each lane's 16 channels are the bf16 SwiGLU
// products of two 16-byte gate and up loads each.
__global__ void swiglu_fp8_kernel(const std::uint16_t* __restrict__ h, long long rows, int h_inter,
                                  std::uint8_t* __restrict__ q, float* __restrict__ s) {
  const int lane = threadIdx.x % 32;
  const long long warps = (long long)gridDim.x * (blockDim.x / 32);
  const int groups = h_inter / kFp8GroupSize;
  for (long long r = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; r < rows; r += warps) {
    const uint4* gate = reinterpret_cast<const uint4*>(h + r * 2 * h_inter);
    const uint4* up = reinterpret_cast<const uint4*>(h + r * 2 * h_inter + h_inter);
    auto swiglu8 = [](uint4 g, uint4 u) {  // 8 gate and 8 up bf16 values -> 8 bf16 SwiGLU products
      const unsigned gw[4] = {g.x, g.y, g.z, g.w}, uw[4] = {u.x, u.y, u.z, u.w};
      unsigned o[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        o[i] = unsigned(float_to_bf16_bits(swiglu_bf16(bf16_lo(gw[i]), bf16_lo(uw[i])))) |
               (unsigned(float_to_bf16_bits(swiglu_bf16(bf16_hi(gw[i]), bf16_hi(uw[i])))) << 16);
      }
      return make_uint4(o[0], o[1], o[2], o[3]);
    };
    auto load = [&](int c, uint4& lo, uint4& hi) {
      lo = swiglu8(gate[c / 8], up[c / 8]);
      hi = swiglu8(gate[c / 8 + 1], up[c / 8 + 1]);
    };
    fp8_quantize_row<kFp8GroupSize>(lane, h_inter, load, q + r * h_inter, s + r * groups);
  }
}

// grid (ceil(pad4(max_rows) / 128), groups), 128 threads: thread i of a block writes row i of every
// k-group of its group.
__global__ void pack_group_scales_kernel(const float* __restrict__ s, int kgroups, const int* __restrict__ table,
                                         float* __restrict__ dst) {
  const int g = blockIdx.y;
  const int first = table[3 * g], rows = table[3 * g + 1], pad_off = table[3 * g + 2];
  const int pad = (rows + 3) / 4 * 4;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= pad) return;
  float* out = dst + size_t(kgroups) * pad_off;
  for (int k = 0; k < kgroups; ++k) out[size_t(k) * pad + i] = i < rows ? s[size_t(first + i) * kgroups + k] : 0.f;
}

__global__ void pad_block_scales_kernel(const float* __restrict__ src, long long n_out, int col_blocks,
                                        int col_blocks_pad, float* __restrict__ dst) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n_out; i += (long long)gridDim.x * blockDim.x) {
    const long long row = i / col_blocks_pad;
    const int c = int(i % col_blocks_pad);
    dst[i] = c < col_blocks ? src[row * col_blocks + c] : 0.f;
  }
}

int grid_for(long long work, int threads) {
  const long long b = (work + threads - 1) / threads;
  return int(b < 132 * 16 ? (b > 0 ? b : 1) : 132 * 16);
}

}  // namespace

cudaError_t launch_gather_rows(const std::uint16_t* x, const int* token_of_send_row, int rows, int width,
                               std::uint16_t* send, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  gather_kernel<<<rows, 128, 0, stream>>>(reinterpret_cast<const uint4*>(x), token_of_send_row, width / 8,
                                          reinterpret_cast<uint4*>(send));
  return cudaGetLastError();
}

cudaError_t launch_swiglu(const std::uint16_t* h, int rows, int h_inter, std::uint16_t* a, cudaStream_t stream) {
  const long long groups = (long long)rows * (h_inter / 8);
  if (groups == 0) return cudaSuccess;
  swiglu_kernel<<<grid_for(groups, 256), 256, 0, stream>>>(reinterpret_cast<const uint4*>(h), groups, h_inter / 8,
                                                           reinterpret_cast<uint4*>(a));
  return cudaGetLastError();
}

cudaError_t launch_combine(const std::uint16_t* returned, const int* send_row_of_slot, const float* weights,
                           int tokens, int top_k, int hidden, std::uint16_t* y, cudaStream_t stream) {
  if (tokens == 0) return cudaSuccess;
  const int vec = hidden / 8;
  combine_kernel<<<tokens, vec < 256 ? ((vec + 31) / 32) * 32 : 256, 0, stream>>>(
      reinterpret_cast<const uint4*>(returned), send_row_of_slot, weights, top_k, vec, reinterpret_cast<uint4*>(y));
  return cudaGetLastError();
}

cudaError_t launch_gather_rows_fp8(const std::uint8_t* q, const float* s, const int* token_of_send_row, int rows,
                                   int hidden, std::uint8_t* send_q, float* send_s, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (hidden % kFp8GroupSize != 0) return cudaErrorInvalidValue;
  gather_fp8_kernel<<<rows, 64, 0, stream>>>(reinterpret_cast<const uint4*>(q), s, token_of_send_row, hidden / 16,
                                             hidden / kFp8GroupSize, reinterpret_cast<uint4*>(send_q), send_s);
  return cudaGetLastError();
}

cudaError_t launch_swiglu_fp8(const std::uint16_t* h, int rows, int h_inter, std::uint8_t* q, float* s,
                              cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (h_inter <= 0 || h_inter % kFp8GroupSize != 0) return cudaErrorInvalidValue;
  const long long want = (rows + 7) / 8;  // 8 warps (rows) per 256-thread block
  swiglu_fp8_kernel<<<int(want < 132 * 16 ? want : 132 * 16), 256, 0, stream>>>(h, rows, h_inter, q, s);
  return cudaGetLastError();
}

cudaError_t launch_pack_group_scales(const float* s, int kgroups, const int* table, int groups, int max_rows,
                                     float* dst, cudaStream_t stream) {
  if (groups <= 0 || max_rows <= 0) return cudaSuccess;
  if (groups > 65535) return cudaErrorInvalidValue;
  const int pad = (max_rows + 3) / 4 * 4;
  pack_group_scales_kernel<<<dim3((pad + 127) / 128, groups), 128, 0, stream>>>(s, kgroups, table, dst);
  return cudaGetLastError();
}

cudaError_t launch_pad_block_scales(const float* src, int matrices, int row_blocks, int col_blocks,
                                    int col_blocks_pad, float* dst, cudaStream_t stream) {
  const long long n = (long long)matrices * row_blocks * col_blocks_pad;
  if (n <= 0) return cudaSuccess;
  if (col_blocks_pad < col_blocks) return cudaErrorInvalidValue;
  pad_block_scales_kernel<<<grid_for(n, 256), 256, 0, stream>>>(src, n, col_blocks, col_blocks_pad, dst);
  return cudaGetLastError();
}

cudaError_t launch_fill_uniform_bf16(std::uint16_t* p, std::size_t n, std::uint64_t seed, float scale,
                                     cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  fill_uniform_kernel<<<grid_for((long long)n, 256), 256, 0, stream>>>(p, n, seed, scale);
  return cudaGetLastError();
}

}  // namespace xstage::moe
