// moe_numerics.hpp against the CUDA toolkit's conversions (their host implementations follow the
// device's cvt.rn.satfinite.e4m3x2.f32 and cvt.rn.bf16.f32): the CPU reference must round as the GPU does.
#include <gtest/gtest.h>

#ifdef XSTAGE_MOE_HAVE_CUDA_HEADERS

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "xstage/moe/moe_numerics.hpp"

namespace {

using namespace xstage::moe;

std::uint8_t cuda_e4m3(float f) { return __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3); }
std::uint16_t cuda_bf16(float f) {
  const __nv_bfloat16 h = __float2bfloat16_rn(f);
  std::uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}

float bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(MoeConversions, E4m3MatchesCudaOnSweepAndEveryTie) {
  long long mismatches = 0;
  // A sweep over all bit patterns (every sign, exponent and NaN class).
  for (std::uint64_t u = 0; u <= 0xffffffffull; u += 65537) {
    const float f = bits(std::uint32_t(u));
    mismatches += float_to_e4m3(f) != cuda_e4m3(f);
  }
  // Every value between adjacent codes: the midpoint (a tie) and one float step either side.
  for (int b = 0; b < 0x7e; ++b) {
    const float lo = e4m3_to_float(std::uint8_t(b)), hi = e4m3_to_float(std::uint8_t(b + 1));
    const float mid = 0.5f * (lo + hi);
    for (float f : {mid, std::nextafter(mid, 0.f), std::nextafter(mid, 1e9f), lo, hi}) {
      for (float s : {1.f, -1.f}) {
        EXPECT_EQ(float_to_e4m3(s * f), cuda_e4m3(s * f)) << "value " << s * f;
        mismatches += float_to_e4m3(s * f) != cuda_e4m3(s * f);
      }
    }
  }
  // Past the largest finite value: both saturate.
  for (float f : {448.f, 449.f, 464.f, 465.f, 1e30f, INFINITY}) EXPECT_EQ(float_to_e4m3(f), cuda_e4m3(f)) << f;
  EXPECT_EQ(mismatches, 0);
}

TEST(MoeConversions, E4m3DecodeMatchesCudaForEveryCode) {
  for (int b = 0; b < 256; ++b) {
    const __half_raw h = __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(b), __NV_E4M3);
    const float ref = __half2float(__half(h));
    const float got = e4m3_to_float(std::uint8_t(b));
    if (std::isnan(ref)) {
      EXPECT_TRUE(std::isnan(got)) << "code " << b;
    } else {
      EXPECT_EQ(got, ref) << "code " << b;
      EXPECT_EQ(std::signbit(got), std::signbit(ref)) << "code " << b;
    }
  }
}

TEST(MoeConversions, Bf16MatchesCuda) {
  long long mismatches = 0;
  for (std::uint64_t u = 0; u <= 0xffffffffull; u += 65537) {
    const float f = bits(std::uint32_t(u));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(f))));
      continue;
    }
    mismatches += float_to_bf16_bits(f) != cuda_bf16(f);
  }
  // Ties: 1 + (2k+1)·2^-8 lies halfway between two bf16 values.
  for (int k = 0; k < 128; ++k) {
    const float f = 1.f + float(2 * k + 1) * 0.00390625f;
    mismatches += float_to_bf16_bits(f) != cuda_bf16(f);
  }
  EXPECT_EQ(mismatches, 0);
}

}  // namespace

#else
TEST(MoeConversions, NotBuilt) { GTEST_SKIP() << "needs the CUDA toolkit's headers (built with the CUDA components)"; }
#endif
