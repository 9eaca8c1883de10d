// The FP8 attention path's quantization pre-pass (attn_fp8_quant.hpp has the layout and the scheme):
// five launches of four memory-bound kernels on the caller's stream, deterministic (reductions in a fixed order).
//   1. kv_stats:    per (b, h, chunk of kFp8StatRows rows): sum of K and max |V| per channel
//   2. kv_finalize: per (b, h): K's mean and V's channel scales from the partials, in chunk order
//   3. quant_rows:  per (b, h, block of Q or K rows): the row (K: x - mean) rotated, max |x| per row (Q) or
//                   per block (K), the scale, s8
//   4. quant_vt:    per (b, h, group of 32 keys): V^T / v_scale in e4m3, keys in slot order
#include "attn_fp8_quant.hpp"

#include <algorithm>

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "xstage/sched/attn_tile_config.hpp"

namespace xstage::attn {

namespace {

constexpr size_t kAlign = sched::kAttnFp8WorkspaceAlign;  // every part starts aligned as the whole
size_t align_up(size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

__device__ __forceinline__ float block_scale_of(float amax, float qmax = kFp8Max) {
  return amax > 0.f ? amax / qmax : 1.f;
}

// Four values, already divided by their scale, as four s8 Q8 / K8 bytes (round to nearest even; saturating).
__device__ __forceinline__ uint32_t pack_qk4(float a, float b, float c, float d) {
  auto byte = [](float x) { return uint32_t(uint8_t(int8_t(max(-127, min(127, __float2int_rn(x)))))); };
  return byte(a) | byte(b) << 8 | byte(c) << 16 | byte(d) << 24;
}

// Rotates one row held as kVecPerRow consecutive lanes x 8 consecutive channels (lane l % kVecPerRow holds
// channels 8 l .. 8 l + 7): x <- x diag(sign) H, H the Walsh-Hadamard matrix (attn_fp8_quant.hpp; its factor
// 1/8 or 1/16, a power of two, goes into the row's scale). Butterflies over channel bits 0-2 inside the
// thread, bits 3.. across lanes; at every stage the element whose bit is clear takes a + b, the other a - b
// (across lanes: other + side x, side = -1 on the lane whose bit is set, one FFMA).
template <int kVecPerRow>
__device__ __forceinline__ void rotate_row8(float (&x)[8], int col) {
#pragma unroll
  for (int i = 0; i < 8; ++i) x[i] *= fp8_rotation_sign(col + i);
#pragma unroll
  for (int h = 1; h < 8; h *= 2) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      if ((i & h) == 0) {
        const float a = x[i], b = x[i + h];
        x[i] = a + b;
        x[i + h] = a - b;
      }
    }
  }
  const int lane = threadIdx.x % kVecPerRow;
#pragma unroll
  for (int m = 1; m < kVecPerRow; m *= 2) {
    const float side = (lane & m) ? -1.f : 1.f;
#pragma unroll
    for (int i = 0; i < 8; ++i) x[i] = __fmaf_rn(side, x[i], __shfl_xor_sync(0xffffffffu, x[i], m));
  }
}

// Strided bf16 [B, S, H, D] source.
struct BshdIn {
  const __nv_bfloat16* data;
  int64_t stride_batch, stride_seq, stride_head;
  __device__ const __nv_bfloat16* row(int b, int s, int h) const {
    return data + b * stride_batch + s * stride_seq + h * stride_head;
  }
};

// grid (chunks, B*H), block kD/2 x 4 threads: each thread sums two channels over every fourth row.
template <int kD>
__global__ void __launch_bounds__(kD * 2) kv_stats_kernel(BshdIn k, BshdIn v, int heads, int seq_k, float* k_sum,
                                                        float* v_max) {
  const int chunk = blockIdx.x, bh = blockIdx.y, b = bh / heads, h = bh % heads;
  const int c2 = threadIdx.x % (kD / 2), lane_row = threadIdx.x / (kD / 2);
  float2 sum = {0.f, 0.f}, vmax = {0.f, 0.f};
  const int s_end = min(seq_k, (chunk + 1) * kFp8StatRows);
  // Unrolled: the loads of several rows in flight per thread (the loop is otherwise latency-bound).
#pragma unroll 8
  for (int s = chunk * kFp8StatRows + lane_row; s < s_end; s += 4) {
    const float2 kk = __bfloat1622float2(reinterpret_cast<const __nv_bfloat162*>(k.row(b, s, h))[c2]);
    const float2 vv = __bfloat1622float2(reinterpret_cast<const __nv_bfloat162*>(v.row(b, s, h))[c2]);
    sum.x += kk.x;
    sum.y += kk.y;
    vmax.x = fmaxf(vmax.x, fabsf(vv.x));
    vmax.y = fmaxf(vmax.y, fabsf(vv.y));
  }
  __shared__ float2 s_sum[4][kD / 2], s_max[4][kD / 2];
  s_sum[lane_row][c2] = sum;
  s_max[lane_row][c2] = vmax;
  __syncthreads();
  if (lane_row == 0) {
    for (int r = 1; r < 4; ++r) {  // fixed order
      sum.x += s_sum[r][c2].x;
      sum.y += s_sum[r][c2].y;
      vmax.x = fmaxf(vmax.x, s_max[r][c2].x);
      vmax.y = fmaxf(vmax.y, s_max[r][c2].y);
    }
    const int64_t at = (int64_t(bh) * gridDim.x + chunk) * kD + 2 * c2;
    k_sum[at] = sum.x;
    k_sum[at + 1] = sum.y;
    v_max[at] = vmax.x;
    v_max[at + 1] = vmax.y;
  }
}

// grid B*H, block kD: one channel per thread, partials summed in chunk order.
template <int kD>
__global__ void __launch_bounds__(kD) kv_finalize_kernel(const float* k_sum, const float* v_max, int chunks, int seq_k,
                                                         float* k_mean, float* v_scale) {
  const int bh = blockIdx.x, d = threadIdx.x;
  float sum = 0.f, vmax = 0.f;
  for (int c = 0; c < chunks; ++c) {
    sum += k_sum[(int64_t(bh) * chunks + c) * kD + d];
    vmax = fmaxf(vmax, v_max[(int64_t(bh) * chunks + c) * kD + d]);
  }
  k_mean[int64_t(bh) * kD + d] = sum / float(seq_k);
  v_scale[int64_t(bh) * kD + d] = block_scale_of(vmax);
}

// grid (blocks, B*H), 256 threads; each thread holds kRows * kD / 8 / 256 vectors of 8 channels, the kD / 8
// threads of a row consecutive lanes of one warp. mean: nullptr (Q) or K's [B*H, kD] mean. kPerRow: one
// scale per row (scale[bh * scales + row]), else one per block (scale[bh * scales + block]). Rows past seq
// are zeros: their per-row scale is 1, and they do not change a block's. dot_with (kPerRow only, or
// nullptr): each row's dot product with this [B*H, kD] vector goes to dot_out[bh * scales + row].
// rotation: the factor of the row's rotation (kFp8RotationQ or kFp8RotationK), folded into its scale: the
// stored scale is rotation x amax / qmax of the rotated row before that factor.
template <int kD, int kRows, bool kPerRow>
__global__ void __launch_bounds__(256) quant_rows_kernel(BshdIn x, int heads, int seq, const float* mean,
                                                         float rotation, int8_t* out, float* scale, int scales,
                                                         const float* dot_with = nullptr, float* dot_out = nullptr) {
  constexpr int kVecPerRow = kD / 8;
  constexpr int kVec = kRows * kVecPerRow / 256;
  static_assert(kVec * 256 == kRows * kVecPerRow && 32 % kVecPerRow == 0);
  const int blk = blockIdx.x, bh = blockIdx.y, b = bh / heads, h = bh % heads;
  const int col = (threadIdx.x % kVecPerRow) * 8;  // the same 8 channels for all of a thread's vectors
  float mu[8];
  for (int i = 0; i < 8; ++i) mu[i] = mean ? mean[int64_t(bh) * kD + col + i] : 0.f;
  float vals[kVec][8];
  float amax = 0.f, row_amax[kVec];
#pragma unroll
  for (int v = 0; v < kVec; ++v) {
    const int r = (threadIdx.x + v * 256) / kVecPerRow;
    const int s = blk * kRows + r;
    if (s < seq) {
      const uint4 raw = *reinterpret_cast<const uint4*>(x.row(b, s, h) + col);
      const __nv_bfloat162* p2 = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float2 f = __bfloat1622float2(p2[i]);
        vals[v][2 * i] = f.x - mu[2 * i];
        vals[v][2 * i + 1] = f.y - mu[2 * i + 1];
      }
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) vals[v][i] = 0.f;
    }
    if constexpr (kPerRow) {
      if (dot_with != nullptr) {  // of the row as given (the rotation keeps dot products)
        float dot = 0.f;
#pragma unroll
        for (int i = 0; i < 8; ++i) dot = __fmaf_rn(vals[v][i], dot_with[int64_t(bh) * kD + col + i], dot);
        for (int o = kVecPerRow / 2; o > 0; o /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, o);
        const int s = blk * kRows + (threadIdx.x + v * 256) / kVecPerRow;
        if (threadIdx.x % kVecPerRow == 0) dot_out[int64_t(bh) * scales + s] = dot;
      }
    }
    rotate_row8<kVecPerRow>(vals[v], col);
    float m = 0.f;
#pragma unroll
    for (int i = 0; i < 8; ++i) m = fmaxf(m, fabsf(vals[v][i]));
    // The row's kVecPerRow lanes are consecutive and aligned within the warp.
    for (int o = kVecPerRow / 2; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    row_amax[v] = m;
    amax = fmaxf(amax, m);
  }
  float block_inv = 0.f;
  if constexpr (!kPerRow) {
    for (int o = 16; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    __shared__ float warp_max[8];
    if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = amax;
    __syncthreads();
    amax = 0.f;
    for (int w = 0; w < 8; ++w) amax = fmaxf(amax, warp_max[w]);
    const float sc = block_scale_of(amax, kFp8QkMax);
    block_inv = 1.f / sc;
    if (threadIdx.x == 0) scale[int64_t(bh) * scales + blk] = sc * rotation;  // exact: a power of two
  }
#pragma unroll
  for (int v = 0; v < kVec; ++v) {
    const int r = (threadIdx.x + v * 256) / kVecPerRow;
    const int s = blk * kRows + r;
    float inv = block_inv;
    if constexpr (kPerRow) {
      const float sc = block_scale_of(row_amax[v], kFp8QkMax);
      inv = 1.f / sc;
      if (threadIdx.x % kVecPerRow == 0) scale[int64_t(bh) * scales + s] = sc * rotation;
    }
    if (s >= seq) continue;
    uint2 packed;
    packed.x = pack_qk4(vals[v][0] * inv, vals[v][1] * inv, vals[v][2] * inv, vals[v][3] * inv);
    packed.y = pack_qk4(vals[v][4] * inv, vals[v][5] * inv, vals[v][6] * inv, vals[v][7] * inv);
    *reinterpret_cast<uint2*>(out + ((int64_t(b) * seq + s) * heads + h) * kD + col) = packed;
  }
}

// grid (seq_k_pad / 32, B*H), 256 threads: one group of 32 keys of V through shared memory, out as 32
// bytes of each V^T row in slot order (fp8_key_of_slot); keys past seq_k are zeros.
template <int kD>
__global__ void __launch_bounds__(256) quant_vt_kernel(BshdIn v, int heads, int seq_k, int vt_keys,
                                                       const float* v_scale, __nv_fp8_e4m3* vt) {
  constexpr int kKeys = kFp8KeyGroup;
  static_assert(kFp8KBlock % kKeys == 0);
  __shared__ __nv_bfloat16 tile[kKeys][kD + 2];  // +2: a warp's column reads spread over banks
  const int grp = blockIdx.x, bh = blockIdx.y, b = bh / heads, h = bh % heads;
  for (int i = threadIdx.x; i < kKeys * kD / 2; i += 256) {
    const int r = i / (kD / 2), c2 = i % (kD / 2);
    const int s = grp * kKeys + r;
    __nv_bfloat162 val = __floats2bfloat162_rn(0.f, 0.f);
    if (s < seq_k) val = reinterpret_cast<const __nv_bfloat162*>(v.row(b, s, h))[c2];
    tile[r][2 * c2] = val.x;
    tile[r][2 * c2 + 1] = val.y;
  }
  __syncthreads();
  const int key0 = grp * kKeys;  // the group's first key, as its key block's start and its offset there
  const int64_t at = int64_t(key0 / kFp8KBlock) * kFp8KBlock + key0 % kFp8KBlock;
  // One channel per thread: 32 bytes out, two 16-byte stores.
  for (int d = threadIdx.x; d < kD; d += 256) {
    const float inv = 1.f / v_scale[int64_t(bh) * kD + d];
    uint32_t words[8];
#pragma unroll
    for (int w = 0; w < 8; ++w) {
      uint32_t word = 0;
#pragma unroll
      for (int j = 0; j < 4; j += 2) {
        const float2 x = make_float2(__bfloat162float(tile[fp8_key_of_slot(4 * w + j)][d]) * inv,
                                     __bfloat162float(tile[fp8_key_of_slot(4 * w + j + 1)][d]) * inv);
        const __nv_fp8x2_storage_t q = __nv_cvt_float2_to_fp8x2(x, __NV_SATFINITE, __NV_E4M3);
        word |= uint32_t(q) << (8 * j);
      }
      words[w] = word;
    }
    uint4* dst = reinterpret_cast<uint4*>(vt + (int64_t(bh) * kD + d) * vt_keys + at);
    dst[0] = make_uint4(words[0], words[1], words[2], words[3]);
    dst[1] = make_uint4(words[4], words[5], words[6], words[7]);
  }
}

template <int kD>
cudaError_t quantize(const AttnForwardArgs& a, const Fp8Workspace& w, cudaStream_t stream) {
  const AttnForwardProblem& p = a.problem;
  char* base = static_cast<char*>(a.workspace);
  const BshdIn q{static_cast<const __nv_bfloat16*>(a.q), p.q_stride_batch, p.q_stride_seq, p.q_stride_head};
  const BshdIn k{static_cast<const __nv_bfloat16*>(a.k), p.k_stride_batch, p.k_stride_seq, p.k_stride_head};
  const BshdIn v{static_cast<const __nv_bfloat16*>(a.v), p.v_stride_batch, p.v_stride_seq, p.v_stride_head};
  const int bh = p.batch * p.heads;
  auto* k_sum = reinterpret_cast<float*>(base + w.k_sum);
  auto* v_max = reinterpret_cast<float*>(base + w.v_max);
  auto* k_mean = reinterpret_cast<float*>(base + w.k_mean);
  auto* v_scale = reinterpret_cast<float*>(base + w.v_scale);
  kv_stats_kernel<kD><<<dim3(w.stat_chunks, bh), kD * 2, 0, stream>>>(k, v, p.heads, p.seq_k, k_sum, v_max);
  kv_finalize_kernel<kD><<<bh, kD, 0, stream>>>(k_sum, v_max, w.stat_chunks, p.seq_k, k_mean, v_scale);
  constexpr int kQRowsPerCta = 64;
  quant_rows_kernel<kD, kQRowsPerCta, true><<<dim3(w.q_rows / kQRowsPerCta, bh), 256, 0, stream>>>(
      q, p.heads, p.seq_q, nullptr, kFp8RotationQ, reinterpret_cast<int8_t*>(base + w.q8), reinterpret_cast<float*>(base + w.q_scale),
      w.q_rows, k_mean, reinterpret_cast<float*>(base + w.q_dot_kmean));
  quant_rows_kernel<kD, kFp8KBlock, false><<<dim3(w.k_blocks, bh), 256, 0, stream>>>(
      k, p.heads, p.seq_k, k_mean, kFp8RotationK, reinterpret_cast<int8_t*>(base + w.k8), reinterpret_cast<float*>(base + w.k_scale),
      w.k_blocks);
  quant_vt_kernel<kD><<<dim3(w.seq_k_pad / kFp8KeyGroup, bh), 256, 0, stream>>>(
      v, p.heads, p.seq_k, w.seq_k_pad, v_scale, reinterpret_cast<__nv_fp8_e4m3*>(base + w.vt8));
  return cudaGetLastError();
}

}  // namespace

Fp8Workspace fp8_workspace_layout(const AttnForwardProblem& p) {
  Fp8Workspace w;
  const size_t bh = size_t(p.batch) * p.heads, d = size_t(p.head_dim);
  const int block_m = sched::attn_block_m(p.head_dim, /*fp8=*/true);
  // Whole tiles of query rows: the kernel's last tile reads a scale for each of its rows.
  w.q_rows = (p.seq_q + block_m - 1) / block_m * block_m;
  w.k_blocks = (p.seq_k + kFp8KBlock - 1) / kFp8KBlock;
  w.seq_k_pad = w.k_blocks * kFp8KBlock;
  w.stat_chunks = (p.seq_k + kFp8StatRows - 1) / kFp8StatRows;
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const size_t here = at;
    at = align_up(at + bytes);
    return here;
  };
  w.q8 = take(bh * p.seq_q * d);
  w.k8 = take(bh * p.seq_k * d);
  w.vt8 = take(bh * d * w.seq_k_pad);
  w.q_scale = take(bh * w.q_rows * sizeof(float));
  w.k_scale = take(bh * w.k_blocks * sizeof(float));
  w.v_scale = take(bh * d * sizeof(float));
  w.k_mean = take(bh * d * sizeof(float));
  w.q_dot_kmean = take(bh * w.q_rows * sizeof(float));
  w.k_sum = take(bh * w.stat_chunks * d * sizeof(float));
  w.v_max = take(bh * w.stat_chunks * d * sizeof(float));
  w.bytes = at;
  return w;
}

Fp8Operands fp8_operands(const Fp8Workspace& w, void* workspace) {
  char* base = static_cast<char*>(workspace);
  return Fp8Operands{base + w.q8,
                     base + w.k8,
                     base + w.vt8,
                     reinterpret_cast<const float*>(base + w.q_scale),
                     reinterpret_cast<const float*>(base + w.k_scale),
                     reinterpret_cast<const float*>(base + w.v_scale),
                     reinterpret_cast<const float*>(base + w.q_dot_kmean)};
}

cudaError_t fp8_quantize(const AttnForwardArgs& args, const Fp8Workspace& w, cudaStream_t stream) {
  if (args.problem.head_dim != kFp8HeadDim) return cudaErrorInvalidValue;
  return quantize<kFp8HeadDim>(args, w, stream);
}

}  // namespace xstage::attn
