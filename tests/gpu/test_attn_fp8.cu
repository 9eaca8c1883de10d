// GPU tests of the FP8 attention forward (precision kFp8) against the exact host reference, with the bf16
// kernel's error on the same inputs beside it: fresh random inputs each run from several distributions
// (plain normal; outlier channels; a large mean on K; peaked scores), outputs poisoned with NaN before
// each launch, every launch repeated to check the pre-pass and the kernel are deterministic.
// The checks: on every case, correctness bounds a wrong scale, key order or mask exceeds by tens of percent;
// on the cases with at least 1000 keys (enough values for the error to be the formats', not one draw's),
// the cosine bar, which holds on outlier channels only with the Q / K rotation in place (0.998 without it),
// and a relative L1 bound above the one-term e4m3 P V floor (3.7-4.0 % on these inputs,
// bench/attn/fp8_error_model.py). Whether the issue's bars (cosine >= 0.999, relative L1 <= 3e-2) hold is
// printed on each line; docs/attn_fp8.md has the measured table.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_support.hpp"
#include "xstage/attn/forward.hpp"
#include "xstage/gpu/check.hpp"
#include "xstage/testing/attn_reference.hpp"

namespace xstage::attn {
namespace {

using test::fresh_seed;

enum class Dist { kNormal, kOutlierChannels, kKeyMean, kPeaked };
const char* dist_name(Dist d) {
  switch (d) {
    case Dist::kNormal: return "normal";
    case Dist::kOutlierChannels: return "outlier_channels";
    case Dist::kKeyMean: return "key_mean";
    case Dist::kPeaked: return "peaked";
  }
  return "?";
}

// Host-drawn [B, S, H, D] bf16 tensors of a distribution. kOutlierChannels: 4 of the 128 channels of
// Q, K and V 16x larger (the outlier channels of DiT activations); kKeyMean: every key shares a
// per-(head, channel) offset of standard deviation 8 (the shared component SageAttention smooths away);
// kPeaked: Q and K of standard deviation 2 (scores of standard deviation 4: a few keys take most mass).
std::vector<uint16_t> draw(const AttnForwardProblem& p, int seq, int which, Dist dist, uint64_t seed) {
  std::mt19937_64 rng(seed * 7 + which);
  std::normal_distribution<float> n01(0.f, 1.f);
  const int d = p.head_dim;
  std::vector<float> offset(size_t(p.heads) * d, 0.f);
  if (dist == Dist::kKeyMean && which == 1) {
    for (float& o : offset) o = 8.f * n01(rng);
  }
  std::vector<uint16_t> out(size_t(p.batch) * seq * p.heads * d);
  const float sd = dist == Dist::kPeaked && which < 2 ? 2.f : 1.f;
  for (size_t i = 0; i < out.size(); ++i) {
    const int c = int(i % d), h = int((i / d) % p.heads);
    float x = sd * n01(rng) + offset[size_t(h) * d + c];
    if (dist == Dist::kOutlierChannels && (c == 3 || c == 40 || c == 77 || c == 120)) x *= 16.f;
    out[i] = float_to_bf16(x);
  }
  return out;
}

struct LaunchResult {
  std::vector<uint16_t> o;
  std::vector<float> lse;
};

// One launch of `precision` over host inputs, outputs NaN-poisoned; launched twice, both must agree.
LaunchResult launch(const AttnForwardProblem& p, const std::vector<uint16_t>& hq, const std::vector<uint16_t>& hk,
           const std::vector<uint16_t>& hv, AttnPrecision precision) {
  void *q, *k, *v, *o, *ws = nullptr;
  float* lse;
  const size_t nl = size_t(p.batch) * p.heads * p.seq_q;
  XSTAGE_CUDA_CHECK(cudaMalloc(&q, hq.size() * 2));
  XSTAGE_CUDA_CHECK(cudaMalloc(&k, hk.size() * 2));
  XSTAGE_CUDA_CHECK(cudaMalloc(&v, hv.size() * 2));
  XSTAGE_CUDA_CHECK(cudaMalloc(&o, hq.size() * 2));
  XSTAGE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&lse), nl * 4));
  XSTAGE_CUDA_CHECK(cudaMemcpy(q, hq.data(), hq.size() * 2, cudaMemcpyHostToDevice));
  XSTAGE_CUDA_CHECK(cudaMemcpy(k, hk.data(), hk.size() * 2, cudaMemcpyHostToDevice));
  XSTAGE_CUDA_CHECK(cudaMemcpy(v, hv.data(), hv.size() * 2, cudaMemcpyHostToDevice));
  AttnForwardArgs a{p, q, k, v, o, lse};
  a.precision = precision;
  a.workspace_bytes = attn_forward_workspace_bytes(p, precision);
  if (a.workspace_bytes) {
    XSTAGE_CUDA_CHECK(cudaMalloc(&ws, a.workspace_bytes));
    XSTAGE_CUDA_CHECK(cudaMemset(ws, 0xff, a.workspace_bytes));  // stale workspace must not matter
  }
  a.workspace = ws;
  EXPECT_EQ(attn_forward_can_implement(a), "");
  LaunchResult r;
  for (int i = 0; i < 2; ++i) {
    XSTAGE_CUDA_CHECK(cudaMemset(o, 0xff, hq.size() * 2));
    XSTAGE_CUDA_CHECK(cudaMemset(lse, 0xff, nl * 4));
    XSTAGE_CUDA_CHECK(attn_forward(a, nullptr));
    XSTAGE_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<uint16_t> out(hq.size());
    XSTAGE_CUDA_CHECK(cudaMemcpy(out.data(), o, out.size() * 2, cudaMemcpyDeviceToHost));
    if (i > 0) EXPECT_EQ(out, r.o) << "launch 1 differs from launch 0";
    r.o = std::move(out);
  }
  r.lse.resize(nl);
  XSTAGE_CUDA_CHECK(cudaMemcpy(r.lse.data(), lse, nl * 4, cudaMemcpyDeviceToHost));
  for (void* t : {q, k, v, o, ws, static_cast<void*>(lse)}) cudaFree(t);
  return r;
}

struct Case {
  int batch, seq_q, seq_k, heads;
  Dist dist;
  size_t rows;  // sampled rows (0: all)
};

std::string case_name(const Case& c) {
  return std::string(dist_name(c.dist)) + "_b" + std::to_string(c.batch) + "_sq" + std::to_string(c.seq_q) + "_sk" +
         std::to_string(c.seq_k) + "_h" + std::to_string(c.heads);
}

class AttnFp8 : public ::testing::TestWithParam<Case> {};

TEST_P(AttnFp8, MeetsAccuracyBarsBesideBf16) {
  REQUIRE_HOPPERS(1);
  const Case c = GetParam();
  const AttnForwardProblem p = make_bshd_problem(c.batch, c.seq_q, c.seq_k, c.heads, 128);
  const uint64_t seed = fresh_seed();
  const auto hq = draw(p, p.seq_q, 0, c.dist, seed), hk = draw(p, p.seq_k, 1, c.dist, seed),
             hv = draw(p, p.seq_k, 2, c.dist, seed);
  const LaunchResult fp8 = launch(p, hq, hk, hv, AttnPrecision::kFp8);
  const LaunchResult bf16 = launch(p, hq, hk, hv, AttnPrecision::kBf16);
  EXPECT_EQ(attn_count_non_finite(p, fp8.o.data()), 0u) << "unwritten (NaN-poisoned) or non-finite outputs";
  const std::vector<AttnRow> rows = c.rows ? attn_sample_rows(p, c.rows, seed) : attn_all_rows(p);
  std::vector<float> ref, ref_lse;
  attn_reference_rows(p, hq.data(), hk.data(), hv.data(), rows, AttnRefPrecision::kExact, ref, ref_lse);
  const AttnErrorStats e8 = attn_compare(attn_gather_rows(p, fp8.o.data(), rows), ref);
  const AttnErrorStats e16 = attn_compare(attn_gather_rows(p, bf16.o.data(), rows), ref);
  // The log-sum-exp carries the scores' quantization error, which grows with the scores (a peaked or
  // outlier-dominated row): the bound is relative. A lost offset (the 2^8 headroom: 5.5; the K smoothing's
  // q . k_mean: tens) is far outside it.
  double lse_err = 0;  // max |lse - ref| / (0.02 |ref| + 0.05)
  for (size_t i = 0; i < rows.size(); ++i) {
    const float got = fp8.lse[(size_t(rows[i].batch) * p.heads + rows[i].head) * p.seq_q + rows[i].row];
    const double bound = 0.02 * std::fabs(double(ref_lse[i])) + 0.05;
    lse_err = std::max(lse_err, std::isfinite(got) ? std::fabs(double(got) - ref_lse[i]) / bound : INFINITY);
  }
  const bool bars = e8.cosine >= 0.999 && e8.rel_l1 <= 3e-2;
  std::printf("  %s seed=%llu rows=%zu: fp8 cos %.6f rel_l1 %.3e rel_l2 %.3e lse/bound %.2f | bf16 cos %.6f rel_l1 %.3e"
              " | bars %s\n",
              case_name(c).c_str(), (unsigned long long)seed, rows.size(), e8.cosine, e8.rel_l1, e8.rel_l2, lse_err,
              e16.cosine, e16.rel_l1, bars ? "met" : "missed");
  EXPECT_EQ(e8.non_finite, 0u);
  EXPECT_GE(e8.cosine, 0.995);
  EXPECT_LE(e8.rel_l1, 6e-2);
  if (c.seq_k >= 1000) {
    EXPECT_GE(e8.cosine, 0.999) << "the Q / K rotation";
    EXPECT_LE(e8.rel_l1, 4.5e-2);
  }
  EXPECT_LE(lse_err, 1.0) << "log-sum-exp (error / bound)";
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AttnFp8,
    ::testing::Values(Case{1, 128, 128, 1, Dist::kNormal, 0},             // one full tile
                      Case{1, 1, 5, 1, Dist::kNormal, 0},                 // one query, five keys
                      Case{1, 64, 200, 2, Dist::kNormal, 0},              // partial query tile, ragged keys
                      Case{2, 300, 300, 3, Dist::kNormal, 0},             // ragged both, batch > 1
                      Case{1, 257, 129, 2, Dist::kNormal, 0},             // one row/column past a tile
                      Case{1, 512, 1200, 1, Dist::kNormal, 0},            // cross-attention lengths
                      Case{2, 2000, 2000, 8, Dist::kNormal, 300},         // persistent grid, many tiles
                      Case{1, 1000, 1000, 2, Dist::kOutlierChannels, 0},  // DiT-like outlier channels
                      Case{1, 1000, 1000, 2, Dist::kKeyMean, 0},          // large shared K component
                      Case{1, 1000, 1000, 2, Dist::kPeaked, 0},           // peaked softmax
                      Case{1, 4096, 4096, 2, Dist::kOutlierChannels, 300}),
    [](const ::testing::TestParamInfo<Case>& i) { return case_name(i.param); });

TEST(AttnFp8Api, RejectsWhatItCannotRun) {
  alignas(256) static char buf[1024];
  AttnForwardProblem p = make_bshd_problem(1, 128, 128, 1, 64);
  AttnForwardArgs a{p, buf, buf, buf, buf, nullptr};
  a.precision = AttnPrecision::kFp8;
  a.workspace = buf;
  a.workspace_bytes = sizeof(buf);
  EXPECT_NE(attn_forward_can_implement(a).find("head_dim 64 with precision fp8"), std::string::npos);
  a.problem = make_bshd_problem(1, 128, 128, 1, 128);
  const size_t need = attn_forward_workspace_bytes(a.problem, AttnPrecision::kFp8);
  EXPECT_GT(need, size_t(128 * 128 * 3));  // q8, k8, v^T8 at least
  EXPECT_EQ(attn_forward_workspace_bytes(a.problem, AttnPrecision::kBf16), 0u);
  EXPECT_NE(attn_forward_can_implement(a).find("workspace_bytes 1024"), std::string::npos);
  a.workspace = nullptr;
  EXPECT_NE(attn_forward_can_implement(a).find("needs a workspace"), std::string::npos);
  a.workspace = buf + 16;
  a.workspace_bytes = need;
  EXPECT_NE(attn_forward_can_implement(a).find("256-byte"), std::string::npos);
  a.precision = static_cast<AttnPrecision>(7);
  EXPECT_NE(attn_forward_can_implement(a).find("precision 7"), std::string::npos);
  AttnPrecision parsed = AttnPrecision::kBf16;
  EXPECT_TRUE(attn_precision_from_name("fp8", &parsed));
  EXPECT_EQ(parsed, AttnPrecision::kFp8);
  EXPECT_FALSE(attn_precision_from_name("fp4", &parsed));
  EXPECT_EQ(parsed, AttnPrecision::kFp8);
}

}  // namespace
}  // namespace xstage::attn
