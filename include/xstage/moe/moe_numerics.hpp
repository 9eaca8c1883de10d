// Number formats of the MoE layer, shared by the CPU reference and the GPU kernels so both round and
// quantize the same way: bf16 rounding, FP8 e4m3 encode/decode, and the DeepSeek-style scales
// (per token per 128 channels for activations, per 128×128 block for weights, FP32 promotion).
// Pure arithmetic: no CUDA runtime, usable in host code and, under nvcc, in device code.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#endif

#include "xstage/gpu/float_bits.hpp"
#include "xstage/gpu/host_device.hpp"

namespace xstage::moe {

// Channels that share one activation scale, and the edge of a weight scale block (DeepSeek-V3).
inline constexpr int kFp8GroupSize = 128;
// Largest finite e4m3 magnitude (S.1111.110 = 1.75 · 2^8).
inline constexpr float kE4m3Max = 448.f;

// float -> bf16 bits, round to nearest even (the rounding of cuBLAS epilogues and __float2bfloat16).
// In device code the conversion instruction (cvt.rn.bf16.f32) does it: the same bits for every number
// and infinity; a NaN comes out as the canonical quiet NaN 0x7fff instead of keeping its payload.
XSTAGE_HOST_DEVICE_INLINE std::uint16_t float_to_bf16_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
#else
  const std::uint32_t u = gpu::float_bits(f);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return std::uint16_t((u >> 16) | 0x40u);  // quiet NaN
  const std::uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return std::uint16_t((u + rounding) >> 16);
#endif
}

XSTAGE_HOST_DEVICE_INLINE float bf16_bits_to_float(std::uint16_t b) { return gpu::float_of_bits(std::uint32_t(b) << 16); }

// The value a float takes once stored as bf16.
XSTAGE_HOST_DEVICE_INLINE float round_bf16(float f) { return bf16_bits_to_float(float_to_bf16_bits(f)); }

// SiLU as the kernels compute it: x · 1/(1 + e^{-x}) in float.
XSTAGE_HOST_DEVICE_INLINE float silu(float x) { return x / (1.f + expf(-x)); }

// SwiGLU of one element as the GPU path stores it: gate and up arrive as bf16 (GEMM outputs), the
// product is computed in float and stored as bf16.
XSTAGE_HOST_DEVICE_INLINE float swiglu_bf16(float gate_bf16, float up_bf16) { return round_bf16(silu(gate_bf16) * up_bf16); }

// float -> e4m3 bits (1 sign, 4 exponent bits with bias 7, 3 mantissa bits; no infinities), round to
// nearest even, saturating to ±448 (the "satfinite" conversion); NaN -> 0x7f. Bit arithmetic on the
// float's encoding (the CPU tests check it against the CUDA toolkit's conversion on a sweep and at
// every tie).
XSTAGE_HOST_DEVICE_INLINE std::uint8_t float_to_e4m3(float f) {
  const std::uint32_t u = gpu::float_bits(f);
  const std::uint8_t sign = std::uint8_t((u >> 24) & 0x80u);
  const std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7f;                      // NaN
  if (a >= 0x43e00000u) return std::uint8_t(sign | 0x7e);  // |f| >= 448 (and infinity): saturate
  if (a < 0x3c800000u) {
    // |f| < 2^-6: the subnormal grid m·2^-9, m = 0..8 (8 is the smallest normal, encoded 0x08). |f|·2^9
    // is exact; adding and removing 2^23 rounds it to an integer, ties to even.
    const float scaled = gpu::float_of_bits(a) * 512.f;
    const float r = (scaled + 8388608.f) - 8388608.f;
    return std::uint8_t(sign | int(r));
  }
  // Normal: keep 3 of the 23 mantissa bits, round to nearest even (a carry moves into the exponent),
  // and rebias the exponent from 127 to 7.
  const std::uint32_t rounded = (a + 0x7ffffu + ((a >> 20) & 1u)) >> 20;
  std::uint32_t bits = rounded - (120u << 3);
  if (bits > 0x7eu) bits = 0x7e;  // 0x7f is NaN: the round-up past 448 saturates
  return std::uint8_t(sign | bits);
}

XSTAGE_HOST_DEVICE_INLINE float e4m3_to_float(std::uint8_t b) {
  const std::uint32_t biased = (b >> 3) & 0xfu, m = b & 7u;
  if (biased == 0xf && m == 7) return gpu::float_of_bits(0x7fc00000u);
  const float mag = biased == 0 ? float(m) * 0.001953125f  // m·2^-9
                                : gpu::float_of_bits(((biased + 120u) << 23) | (m << 20));
  return (b & 0x80) ? -mag : mag;
}

// Scale of one quantization group from its largest magnitude: the group's values divided by the scale
// fill e4m3's range. A group of zeros gets scale 1 (anything would do; 1 keeps decode exact).
XSTAGE_HOST_DEVICE_INLINE float fp8_scale_for_amax(float amax) { return amax > 0.f ? amax / kE4m3Max : 1.f; }

// Quantize one value with its group's scale: x times the scale's reciprocal (one IEEE division per
// group, then a multiply per value: host and device compute the same bits, and a kernel quantizing a
// row pays no division per element).
XSTAGE_HOST_DEVICE_INLINE float fp8_inverse_scale(float scale) { return 1.f / scale; }
XSTAGE_HOST_DEVICE_INLINE std::uint8_t fp8_quantize_inv(float x, float inv_scale) { return float_to_e4m3(x * inv_scale); }
XSTAGE_HOST_DEVICE_INLINE std::uint8_t fp8_quantize(float x, float scale) { return fp8_quantize_inv(x, fp8_inverse_scale(scale)); }
XSTAGE_HOST_DEVICE_INLINE float fp8_dequantize(std::uint8_t q, float scale) { return e4m3_to_float(q) * scale; }

// Number of scale groups along a dimension of n channels (the last group may be partial).
XSTAGE_HOST_DEVICE_INLINE int fp8_groups(int n, int group = kFp8GroupSize) { return (n + group - 1) / group; }

}  // namespace xstage::moe
