// Number formats of the MoE layer, shared by the CPU reference and the GPU kernels so both round and
// quantize the same way: bf16 rounding, FP8 e4m3 encode/decode, and the DeepSeek-style scales
// (per token per 128 channels for activations, per 128×128 block for weights, FP32 promotion).
// Pure arithmetic: no CUDA runtime, usable in host code and, under nvcc, in device code.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define XSTAGE_MOE_HD __host__ __device__ __forceinline__
#else
#define XSTAGE_MOE_HD inline
#endif

namespace xstage::moe {

// Channels that share one activation scale, and the edge of a weight scale block (DeepSeek-V3).
inline constexpr int kFp8GroupSize = 128;
// Largest finite e4m3 magnitude (S.1111.110 = 1.75 · 2^8).
inline constexpr float kE4m3Max = 448.f;

XSTAGE_MOE_HD std::uint32_t moe_float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

XSTAGE_MOE_HD float moe_bits_float(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// float -> bf16 bits, round to nearest even (the rounding of cuBLAS epilogues and __float2bfloat16).
XSTAGE_MOE_HD std::uint16_t float_to_bf16_bits(float f) {
  const std::uint32_t u = moe_float_bits(f);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return std::uint16_t((u >> 16) | 0x40u);  // quiet NaN
  const std::uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return std::uint16_t((u + rounding) >> 16);
}

XSTAGE_MOE_HD float bf16_bits_to_float(std::uint16_t b) { return moe_bits_float(std::uint32_t(b) << 16); }

// The value a float takes once stored as bf16.
XSTAGE_MOE_HD float round_bf16(float f) { return bf16_bits_to_float(float_to_bf16_bits(f)); }

// SiLU as the kernels compute it: x · 1/(1 + e^{-x}) in float.
XSTAGE_MOE_HD float silu(float x) { return x / (1.f + expf(-x)); }

// SwiGLU of one element as the GPU path stores it: gate and up arrive as bf16 (GEMM outputs), the
// product is computed in float and stored as bf16.
XSTAGE_MOE_HD float swiglu_bf16(float gate_bf16, float up_bf16) { return round_bf16(silu(gate_bf16) * up_bf16); }

// float -> e4m3 bits (1 sign, 4 exponent bits with bias 7, 3 mantissa bits; no infinities), round to
// nearest even, saturating to ±448 (the "satfinite" conversion); NaN -> 0x7f.
XSTAGE_MOE_HD std::uint8_t float_to_e4m3(float f) {
  const std::uint32_t u = moe_float_bits(f);
  const std::uint8_t sign = std::uint8_t((u >> 24) & 0x80u);
  const float a = fabsf(f);
  if (a != a) return 0x7f;  // NaN
  if (a >= kE4m3Max) return std::uint8_t(sign | 0x7e);
  // Smallest normal is 2^-6; below it the spacing is 2^-9 (subnormals m·2^-9, m = 0..7).
  const bool subnormal = a < 0.015625f;
  int e = 0;
  float step;
  if (subnormal) {
    step = 0.001953125f;  // 2^-9
  } else {
    e = int((moe_float_bits(a) >> 23) & 0xffu) - 127;  // unbiased exponent, -6..8
    step = ldexpf(1.f, e - 3);
  }
  // Quantize a to a multiple of `step`, ties to even (exact: a/step has few enough bits in float).
  const float q = a / step;
  float r = floorf(q);
  const float frac = q - r;
  if (frac > 0.5f || (frac == 0.5f && fmodf(r, 2.f) != 0.f)) r += 1.f;
  int m = int(r);
  if (subnormal) {
    if (m >= 8) return std::uint8_t(sign | (1 << 3));  // rounded up to the smallest normal 2^-6
    return std::uint8_t(sign | m);
  }
  // Normal: m in [8, 16]; 16 means the next binade.
  int biased = e + 7;
  if (m == 16) {
    m = 8;
    ++biased;
  }
  const std::uint8_t bits = std::uint8_t(sign | (biased << 3) | (m - 8));
  return (bits & 0x7f) == 0x7f ? std::uint8_t(sign | 0x7e) : bits;  // 0x7f is NaN: clamp to 448
}

XSTAGE_MOE_HD float e4m3_to_float(std::uint8_t b) {
  const int biased = (b >> 3) & 0xf;
  const int m = b & 7;
  if (biased == 0xf && m == 7) return moe_bits_float(0x7fc00000u);
  const float mag = biased == 0 ? ldexpf(float(m), -9) : ldexpf(float(8 + m), biased - 10);
  return (b & 0x80) ? -mag : mag;
}

// Scale of one quantization group from its largest magnitude: the group's values divided by the scale
// fill e4m3's range. A group of zeros gets scale 1 (anything would do; 1 keeps decode exact).
XSTAGE_MOE_HD float fp8_scale_for_amax(float amax) { return amax > 0.f ? amax / kE4m3Max : 1.f; }

// Quantize one value with its group's scale: x times the scale's reciprocal (one IEEE division per
// group, then a multiply per value: host and device compute the same bits, and a kernel quantizing a
// row pays no division per element).
XSTAGE_MOE_HD float fp8_inverse_scale(float scale) { return 1.f / scale; }
XSTAGE_MOE_HD std::uint8_t fp8_quantize_inv(float x, float inv_scale) { return float_to_e4m3(x * inv_scale); }
XSTAGE_MOE_HD std::uint8_t fp8_quantize(float x, float scale) { return fp8_quantize_inv(x, fp8_inverse_scale(scale)); }
XSTAGE_MOE_HD float fp8_dequantize(std::uint8_t q, float scale) { return e4m3_to_float(q) * scale; }

// Number of scale groups along a dimension of n channels (the last group may be partial).
XSTAGE_MOE_HD int fp8_groups(int n, int group = kFp8GroupSize) { return (n + group - 1) / group; }

}  // namespace xstage::moe
