// The separate-kernel MoE baseline against the CPU reference: fresh random inputs each run, output
// poisoned (NaN) first, balanced and skewed routing, experts (and a whole rank) without tokens, both
// GEMM paths, and run-to-run determinism.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_support.hpp"
#include "moe_baseline.hpp"
#include "moe_reference.hpp"
#include "xstage/comm/team.hpp"
#include "xstage/moe/routing.hpp"

namespace {

using namespace xstage;
using namespace xstage::moe;

enum class RoutingKind { kBalanced, kSkewed, kColdExperts, kAllToRankZero };

std::vector<Routing> make_routing(const MoeDims& d, RoutingKind kind, std::mt19937_64& rng) {
  std::vector<Routing> out;
  for (int r = 0; r < d.ranks; ++r) {
    const std::uint64_t seed = rng();
    switch (kind) {
      case RoutingKind::kBalanced: out.push_back(balanced_routing(d.tokens, d.experts, d.top_k, seed)); break;
      case RoutingKind::kSkewed: out.push_back(skewed_routing(d.tokens, d.experts, d.top_k, 1.2, seed)); break;
      case RoutingKind::kColdExperts:
      case RoutingKind::kAllToRankZero: {
        // Tokens use only experts [0, usable): the others (and, for kAllToRankZero, every expert of the
        // ranks above 0) receive nothing.
        const int usable = kind == RoutingKind::kAllToRankZero ? d.experts_per_rank() : d.experts - 3;
        Routing x;
        x.tokens = d.tokens;
        x.experts = d.experts;
        x.top_k = d.top_k;
        std::uniform_real_distribution<float> u(0.05f, 1.f);
        for (int t = 0; t < d.tokens; ++t) {
          const int first = int(rng() % usable);
          for (int j = 0; j < d.top_k; ++j) {
            x.expert_ids.push_back((first + j) % usable);
            x.weights.push_back(u(rng));
          }
        }
        out.push_back(x);
        break;
      }
    }
  }
  return out;
}

std::vector<float> random_vec(size_t n, std::mt19937_64& rng, float scale) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

struct Case {
  const char* name;
  RoutingKind routing;
  GemmPath gemm;
};

class MoeBaselineTest : public ::testing::TestWithParam<Case> {};

TEST_P(MoeBaselineTest, MatchesCpuReference) {
  REQUIRE_GPUS(2);
  const Case c = GetParam();
  auto team = comm::Team::single_process({0, 1});
  // Small enough for the CPU reference, large enough for several 128-channel groups and uneven experts.
  MoeDims d{2, 96, 256, 192, 8, 3};
  MoeBaseline layer(team, d, c.gemm);
  std::mt19937_64 rng(std::random_device{}());
  const int el = d.experts_per_rank();
  const size_t n1 = size_t(2) * d.h_inter * d.hidden, n2 = size_t(d.hidden) * d.h_inter;
  const auto w1 = random_vec(n1 * d.experts, rng, 0.08f);
  const auto w2 = random_vec(n2 * d.experts, rng, 0.08f);
  const auto x = random_vec(size_t(d.ranks) * d.tokens * d.hidden, rng, 1.f);
  const auto routing = make_routing(d, c.routing, rng);
  for (int r = 0; r < d.ranks; ++r) {
    layer.set_tokens(r, std::vector<float>(x.begin() + size_t(r) * d.tokens * d.hidden,
                                           x.begin() + size_t(r + 1) * d.tokens * d.hidden));
    layer.set_weights(r, &w1[n1 * r * el], &w2[n2 * r * el]);
    layer.set_routing(r, routing[r]);
  }
  const auto ref = moe_reference_layer(d, MoePrecision::kBf16, x, routing, w1, w2);

  std::vector<float> first;
  for (int pass = 0; pass < 2; ++pass) {
    layer.poison_output();
    layer.run(30.0);
    std::vector<float> got;
    for (int r = 0; r < d.ranks; ++r) {
      const auto y = layer.output(r);
      got.insert(got.end(), y.begin(), y.end());
    }
    size_t non_finite = 0;
    for (float v : got) non_finite += !std::isfinite(v);
    ASSERT_EQ(non_finite, 0u) << "elements not written (still NaN) or non-finite";
    const double err = relative_l2_error(got.data(), ref.data(), ref.size());
    EXPECT_LT(err, 1e-2) << c.name << " pass " << pass << " (gemm " << to_string(layer.gemm_path()) << ")";
    if (pass == 0) {
      std::printf("[moe] %s: gemm path %s, rel_l2 %.3e, rows received %lld + %lld\n", c.name,
                  to_string(layer.gemm_path()), err, layer.last_received_rows()[0], layer.last_received_rows()[1]);
      first = got;
    } else {
      EXPECT_EQ(got, first) << "second run differs from the first: not deterministic";
    }
  }
  const auto rows = layer.last_received_rows();
  EXPECT_EQ(rows[0] + rows[1], (long long)d.ranks * d.tokens * d.top_k);
  if (c.routing == RoutingKind::kAllToRankZero) EXPECT_EQ(rows[1], 0);
  const auto times = layer.last_stage_times();
  for (const auto& t : times) EXPECT_GT(t.total_ms, 0.0);
}

INSTANTIATE_TEST_SUITE_P(
    Routings, MoeBaselineTest,
    ::testing::Values(Case{"balanced_grouped", RoutingKind::kBalanced, GemmPath::kGrouped},
                      Case{"skewed_grouped", RoutingKind::kSkewed, GemmPath::kGrouped},
                      Case{"cold_experts_grouped", RoutingKind::kColdExperts, GemmPath::kGrouped},
                      Case{"all_to_rank0_grouped", RoutingKind::kAllToRankZero, GemmPath::kGrouped},
                      Case{"balanced_loop", RoutingKind::kBalanced, GemmPath::kLoop},
                      Case{"skewed_loop", RoutingKind::kSkewed, GemmPath::kLoop}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

}  // namespace
