// CPU reference of the MoE layer: hand-checkable cases, experts without tokens, top-k weights, and the
// FP8 (e4m3) quantization rules with their error bounds.
#include <gtest/gtest.h>

#ifdef XSTAGE_HAVE_MOE_REFERENCE

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "xstage/testing/moe_reference.hpp"
#include "xstage/model/error.hpp"
#include "xstage/moe/moe_numerics.hpp"
#include "xstage/moe/routing.hpp"

namespace {

using namespace xstage::moe;

Routing make_routing(int tokens, int experts, int top_k, std::vector<int> ids, std::vector<float> w) {
  Routing r;
  r.tokens = tokens;
  r.experts = experts;
  r.top_k = top_k;
  r.expert_ids = std::move(ids);
  r.weights = std::move(w);
  return r;
}

std::vector<float> random_bf16(size_t n, std::mt19937& rng, float scale) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = round_bf16(u(rng));
  return v;
}

TEST(MoeNumerics, Bf16RoundsToNearestEven) {
  EXPECT_EQ(round_bf16(1.0f), 1.0f);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties to even (1).
  EXPECT_EQ(round_bf16(1.0f + 0.00390625f), 1.0f);
  // 1 + 3·2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties to even (1 + 2^-6).
  EXPECT_EQ(round_bf16(1.0f + 3 * 0.00390625f), 1.0f + 0.015625f);
  EXPECT_TRUE(std::isnan(round_bf16(NAN)));
}

TEST(MoeNumerics, E4m3EncodesEveryCodeExactly) {
  // Every finite code decodes to a value that encodes back to the same code.
  for (int b = 0; b < 256; ++b) {
    const float v = e4m3_to_float(std::uint8_t(b));
    if ((b & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(v));
      continue;
    }
    const std::uint8_t back = float_to_e4m3(v);
    if (v == 0.f) {
      EXPECT_EQ(back & 0x7f, 0);
    } else {
      EXPECT_EQ(back, b) << "code " << b << " value " << v;
    }
  }
  EXPECT_EQ(e4m3_to_float(0x7e), 448.f);
  EXPECT_EQ(e4m3_to_float(0x01), std::ldexp(1.f, -9));  // smallest subnormal
  EXPECT_EQ(e4m3_to_float(0x08), std::ldexp(1.f, -6));  // smallest normal
}

TEST(MoeNumerics, E4m3RoundsAndSaturates) {
  EXPECT_EQ(e4m3_to_float(float_to_e4m3(1000.f)), 448.f);    // satfinite
  EXPECT_EQ(e4m3_to_float(float_to_e4m3(-1000.f)), -448.f);
  EXPECT_EQ(e4m3_to_float(float_to_e4m3(1.0625f)), 1.f);    // halfway 1 and 1.125: even (1)
  EXPECT_EQ(e4m3_to_float(float_to_e4m3(1.1875f)), 1.25f);  // halfway 1.125 and 1.25: even (1.25)
  EXPECT_EQ(e4m3_to_float(float_to_e4m3(1.05f)), 1.f);
  EXPECT_EQ(e4m3_to_float(float_to_e4m3(1.07f)), 1.125f);
  EXPECT_EQ(e4m3_to_float(float_to_e4m3(0.3f)), 0.3125f);
  EXPECT_EQ(e4m3_to_float(float_to_e4m3(1e-5f)), 0.f);
  // Relative rounding error of a normal value is at most 2^-4 (3 mantissa bits).
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(0.02f, 440.f);
  for (int i = 0; i < 10000; ++i) {
    const float x = u(rng);
    EXPECT_LE(std::fabs(e4m3_to_float(float_to_e4m3(x)) - x), x * 0.0625f + 1e-7f) << x;
  }
}

TEST(MoeNumerics, Fp8ActivationRoundTripBound) {
  std::mt19937 rng(11);
  const int n = 300;  // two full groups and a partial one
  std::vector<float> x = random_bf16(n, rng, 3.f);
  x[5] = 0.f;
  std::vector<std::uint8_t> q(n);
  std::vector<float> s(fp8_groups(n)), back(n);
  ASSERT_EQ(s.size(), 3u);
  quantize_activation_fp8(x.data(), n, q.data(), s.data());
  dequantize_activation_fp8(q.data(), s.data(), n, back.data());
  for (int g = 0; g < 3; ++g) {
    float amax = 0;
    for (int c = g * 128; c < std::min(n, g * 128 + 128); ++c) amax = std::max(amax, std::fabs(x[c]));
    EXPECT_FLOAT_EQ(s[g], amax / 448.f);
    for (int c = g * 128; c < std::min(n, g * 128 + 128); ++c) {
      // Normal range: half a mantissa step (2^-4 relative); below 2^-6·scale the absolute step is 2^-9·scale.
      EXPECT_LE(std::fabs(back[c] - x[c]), std::max(std::fabs(x[c]) * 0.0625f, s[g] * 0.001953125f) * 1.0001f);
    }
  }
  EXPECT_EQ(back[5], 0.f);
  EXPECT_LT(relative_l2_error(back.data(), x.data(), n), 0.04);
  // The group maximum maps to 448 exactly.
  std::vector<float> zeros(128, 0.f);
  std::vector<float> zs(1);
  std::vector<std::uint8_t> zq(128);
  quantize_activation_fp8(zeros.data(), 128, zq.data(), zs.data());
  EXPECT_EQ(zs[0], 1.f);  // all-zero group: scale 1, codes 0
  EXPECT_EQ(zq[17], 0);
}

TEST(MoeNumerics, Fp8WeightBlocksHaveTheirOwnScales) {
  std::mt19937 rng(3);
  const int rows = 200, cols = 260;
  std::vector<float> w = random_bf16(size_t(rows) * cols, rng, 0.05f);
  // A block with much larger values must not degrade the others.
  for (int r = 0; r < 128; ++r)
    for (int c = 128; c < 256; ++c) w[size_t(r) * cols + c] *= 100.f;
  std::vector<std::uint8_t> q(w.size());
  std::vector<float> s(size_t(fp8_groups(rows)) * fp8_groups(cols)), back(w.size());
  ASSERT_EQ(s.size(), 2u * 3u);
  quantize_weight_fp8(w.data(), rows, cols, q.data(), s.data());
  dequantize_weight_fp8(q.data(), s.data(), rows, cols, back.data());
  EXPECT_GT(s[1], 50.f * s[0]);
  for (size_t i = 0; i < w.size(); ++i) {
    const size_t r = i / cols, c = i % cols;
    const float sc = s[(r / 128) * 3 + c / 128];
    EXPECT_LE(std::fabs(back[i] - w[i]), std::max(std::fabs(w[i]) * 0.0625f, sc * 0.001953125f) * 1.0001f);
  }
}

// One rank, hidden 2, h_inter 1, two experts: every number checkable by hand.
TEST(MoeReference, HandCheckedTwoExperts) {
  MoeDims d{1, 2, 2, 1, 2, 1};
  // Expert 0: gate row (1, 0), up row (0, 1), W2 column (1, 2). Expert 1: gate (1, 1), up (1, -1), W2 (0.5, -1).
  const std::vector<float> w1 = {1, 0, 0, 1, /* e1 */ 1, 1, 1, -1};
  const std::vector<float> w2 = {1, 2, /* e1 */ 0.5f, -1};
  const std::vector<float> x = {2, 3, /* t1 */ 1, -1};
  // Token 0 -> expert 0 (weight 0.5); token 1 -> expert 1 (weight 2).
  std::vector<Routing> r = {make_routing(2, 2, 1, {0, 1}, {0.5f, 2.f})};
  const std::vector<float> y = moe_reference_layer(d, MoePrecision::kBf16, x, r, w1, w2);
  // Token 0: gate 2, up 3, a = bf16(silu(2)·3); y = 0.5·(a, 2a).
  const float a0 = round_bf16(2.f / (1.f + std::exp(-2.f)) * 3.f);
  EXPECT_FLOAT_EQ(y[0], round_bf16(0.5f * round_bf16(a0)));
  EXPECT_FLOAT_EQ(y[1], round_bf16(0.5f * round_bf16(2 * a0)));
  // Token 1: gate 0 -> silu 0 -> output exactly 0.
  EXPECT_EQ(y[2], 0.f);
  EXPECT_EQ(y[3], 0.f);
}

TEST(MoeReference, TopKWeightsCombineLinearly) {
  std::mt19937 rng(5);
  MoeDims d{2, 4, 16, 8, 4, 2};
  const auto w1 = random_bf16(size_t(d.experts) * 2 * d.h_inter * d.hidden, rng, 0.5f);
  const auto w2 = random_bf16(size_t(d.experts) * d.hidden * d.h_inter, rng, 0.5f);
  const auto x = random_bf16(size_t(d.ranks) * d.tokens * d.hidden, rng, 1.f);
  // Top-2 routing, and the same layer split into its two top-1 halves.
  std::vector<Routing> both, first, second;
  std::mt19937 pick(9);
  for (int r = 0; r < d.ranks; ++r) {
    std::vector<int> ids, id0, id1;
    std::vector<float> w, w0, w1v;
    for (int t = 0; t < d.tokens; ++t) {
      const int e0 = int(pick() % d.experts), e1 = (e0 + 1 + int(pick() % (d.experts - 1))) % d.experts;
      const float a = 0.25f * float(1 + pick() % 3), b = 0.125f * float(1 + pick() % 5);
      ids.insert(ids.end(), {e0, e1});
      w.insert(w.end(), {a, b});
      id0.push_back(e0);
      id1.push_back(e1);
      w0.push_back(a);
      w1v.push_back(b);
    }
    both.push_back(make_routing(d.tokens, d.experts, 2, ids, w));
    first.push_back(make_routing(d.tokens, d.experts, 1, id0, w0));
    second.push_back(make_routing(d.tokens, d.experts, 1, id1, w1v));
  }
  const auto y = moe_reference_layer(d, MoePrecision::kBf16, x, both, w1, w2);
  MoeDims d1 = d;
  d1.top_k = 1;
  const auto y0 = moe_reference_layer(d1, MoePrecision::kBf16, x, first, w1, w2);
  const auto y1 = moe_reference_layer(d1, MoePrecision::kBf16, x, second, w1, w2);
  // The halves are rounded to bf16 once more than the sum: agree within two bf16 steps.
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], y0[i] + y1[i], 0.02f * (std::fabs(y[i]) + 0.05f)) << i;
  // Scaling every weight by 2 scales the output by 2 exactly (a power of two commutes with rounding).
  std::vector<Routing> doubled = both;
  for (auto& r : doubled)
    for (auto& v : r.weights) v *= 2;
  const auto y2 = moe_reference_layer(d, MoePrecision::kBf16, x, doubled, w1, w2);
  for (size_t i = 0; i < y.size(); ++i) EXPECT_EQ(y2[i], 2 * y[i]);
}

TEST(MoeReference, ExpertWithoutTokensIsNeverTouched) {
  std::mt19937 rng(13);
  MoeDims d{2, 8, 32, 16, 4, 2};
  auto w1 = random_bf16(size_t(d.experts) * 2 * d.h_inter * d.hidden, rng, 0.3f);
  auto w2 = random_bf16(size_t(d.experts) * d.hidden * d.h_inter, rng, 0.3f);
  const auto x = random_bf16(size_t(d.ranks) * d.tokens * d.hidden, rng, 1.f);
  // No token routes to expert 3.
  std::vector<Routing> r;
  for (int rank = 0; rank < d.ranks; ++rank) {
    std::vector<int> ids;
    std::vector<float> w;
    for (int t = 0; t < d.tokens; ++t) {
      ids.insert(ids.end(), {t % 3, (t + 1) % 3});
      w.insert(w.end(), {0.6f, 0.4f});
    }
    r.push_back(make_routing(d.tokens, d.experts, d.top_k, ids, w));
  }
  EXPECT_EQ(tokens_per_expert(r[0])[3], 0);
  const auto y = moe_reference_layer(d, MoePrecision::kBf16, x, r, w1, w2);
  // NaN in the unused expert's weights must not reach the output.
  const size_t per1 = size_t(2) * d.h_inter * d.hidden, per2 = size_t(d.hidden) * d.h_inter;
  std::fill(w1.begin() + per1 * 3, w1.end(), NAN);
  std::fill(w2.begin() + per2 * 3, w2.end(), NAN);
  const auto y_nan = moe_reference_layer(d, MoePrecision::kBf16, x, r, w1, w2);
  EXPECT_EQ(y, y_nan);
  double norm = 0;
  for (float v : y) norm += double(v) * v;
  EXPECT_GT(norm, 0.0);
}

TEST(MoeReference, Fp8LayerTracksBf16) {
  std::mt19937 rng(17);
  MoeDims d{2, 6, 256, 128, 4, 2};  // two activation groups along hidden, one along h_inter
  const auto w1 = random_bf16(size_t(d.experts) * 2 * d.h_inter * d.hidden, rng, 0.0625f);
  const auto w2 = random_bf16(size_t(d.experts) * d.hidden * d.h_inter, rng, 0.0625f);
  const auto x = random_bf16(size_t(d.ranks) * d.tokens * d.hidden, rng, 1.f);
  std::vector<Routing> r;
  for (int rank = 0; rank < d.ranks; ++rank) r.push_back(balanced_routing(d.tokens, d.experts, d.top_k, 100 + rank));
  const auto yb = moe_reference_layer(d, MoePrecision::kBf16, x, r, w1, w2);
  const auto yf = moe_reference_layer(d, MoePrecision::kFp8, x, r, w1, w2);
  const double err = relative_l2_error(yf.data(), yb.data(), yb.size());
  // e4m3 keeps 3 mantissa bits (≤ 2^-4 relative per value); errors of independent values average out
  // in the dot products, leaving a few percent on the output.
  EXPECT_GT(err, 1e-4);  // the FP8 path really quantizes
  EXPECT_LT(err, 0.08);
}

TEST(MoeReference, RejectsBadShapes) {
  MoeDims d{3, 4, 8, 8, 4, 2};  // 4 experts over 3 ranks
  EXPECT_THROW(validate_dims(d), xstage::InputError);
  d.ranks = 2;
  d.top_k = 5;
  EXPECT_THROW(validate_dims(d), xstage::InputError);
  d.top_k = 2;
  EXPECT_NO_THROW(validate_dims(d));
  std::vector<Routing> r = {balanced_routing(4, 4, 2, 1)};  // one routing for two ranks
  EXPECT_THROW(moe_reference_layer(d, MoePrecision::kBf16, std::vector<float>(2 * 4 * 8), r,
                                   std::vector<float>(4 * 16 * 8), std::vector<float>(4 * 8 * 8)),
               xstage::InputError);
}

}  // namespace

#else
TEST(MoeReference, NotBuilt) { GTEST_SKIP() << "the MoE reference is built with the CUDA components (src/moe)"; }
#endif
