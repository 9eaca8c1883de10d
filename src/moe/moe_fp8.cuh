// Device side of the FP8 (e4m3) quantization rules of moe_numerics.hpp, shared by the separate-kernel
// FP8 path and the fused kernel: the same scale (amax / 448), the same reciprocal and the hardware's
// satfinite round-to-nearest-even conversion (cvt.rn.satfinite.e4m3x2.f32, which the CPU tests check
// float_to_e4m3 against), so a device-quantized value equals the reference's bit for bit.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "xstage/moe/moe_numerics.hpp"

namespace xstage::moe {

// Four floats -> four e4m3 bytes (first value in the lowest byte).
__device__ __forceinline__ std::uint32_t e4m3x4(float a, float b, float c, float d) {
  const std::uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
  const std::uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(c, d), __NV_SATFINITE, __NV_E4M3);
  return lo | (hi << 16);
}

__device__ __forceinline__ void bf16x8_to_float(uint4 v, float* f) {
  const std::uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = bf16_bits_to_float(std::uint16_t(w[i] & 0xffffu));
    f[2 * i + 1] = bf16_bits_to_float(std::uint16_t(w[i] >> 16));
  }
}

// Largest |value| over the kLanes consecutive lanes of a group (kLanes a power of two, groups aligned
// to kLanes; every lane of the warp calls it).
template <int kLanes>
__device__ __forceinline__ float group_amax(float a) {
#pragma unroll
  for (int m = 1; m < kLanes; m <<= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, m));
  return a;
}

// One lane's 16 consecutive bf16 values (two 16-byte words) of a row quantized with the scale of its
// kGroup-channel group (kGroup / 16 consecutive lanes): returns the 16 e4m3 bytes, `scale` the group's
// scale. Every lane of the warp must call it (shuffles); a lane with no data passes zeros.
template <int kGroup>
__device__ __forceinline__ uint4 fp8_quantize_16(uint4 lo, uint4 hi, float& scale) {
  static_assert(kGroup % 16 == 0 && kGroup / 16 <= 32, "group of 16-value lanes within a warp");
  float f[16];
  bf16x8_to_float(lo, f);
  bf16x8_to_float(hi, f + 8);
  float amax = 0.f;
#pragma unroll
  for (int i = 0; i < 16; ++i) amax = fmaxf(amax, fabsf(f[i]));
  amax = group_amax<kGroup / 16>(amax);
  scale = fp8_scale_for_amax(amax);
  const float inv = fp8_inverse_scale(scale);
  return make_uint4(e4m3x4(f[0] * inv, f[1] * inv, f[2] * inv, f[3] * inv),
                    e4m3x4(f[4] * inv, f[5] * inv, f[6] * inv, f[7] * inv),
                    e4m3x4(f[8] * inv, f[9] * inv, f[10] * inv, f[11] * inv),
                    e4m3x4(f[12] * inv, f[13] * inv, f[14] * inv, f[15] * inv));
}

// One warp quantizes one row of `cols` channels (a multiple of kGroup, so a group's lanes are all in
// or all out of a 512-channel pass): load(c, lo, hi) gives the bf16 values of channels c..c+15 as two
// 16-byte words; their e4m3 bytes go to q[c..c+15] (one 16-byte store) and each group's scale to
// scales[c / kGroup]. Every lane of the warp calls it.
template <int kGroup, class Load>
__device__ __forceinline__ void fp8_quantize_row(int lane, int cols, Load&& load, std::uint8_t* q, float* scales) {
  for (int base = 0; base < cols; base += 512) {
    const int c = base + lane * 16;
    const bool in = c < cols;
    uint4 lo = make_uint4(0, 0, 0, 0), hi = make_uint4(0, 0, 0, 0);
    if (in) load(c, lo, hi);
    float scale;
    const uint4 v = fp8_quantize_16<kGroup>(lo, hi, scale);
    if (in) {
      reinterpret_cast<uint4*>(q)[c / 16] = v;
      if (c % kGroup == 0) scales[c / kGroup] = scale;
    }
  }
}

}  // namespace xstage::moe
