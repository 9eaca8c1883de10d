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
#include "moe_test_support.hpp"
#include "moe_baseline.hpp"
#include "moe_reference.hpp"
#include "xstage/comm/team.hpp"
#include "xstage/moe/routing.hpp"

namespace {

using namespace xstage;
using namespace xstage::moe;
using namespace xstage::moe::test;

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
  const auto ref = load_random_inputs(layer, d, c.routing, rng);

  std::vector<float> first;
  for (int pass = 0; pass < 2; ++pass) {
    layer.poison_output();
    layer.run(30.0);
    const std::vector<float> got = all_outputs(layer, d);
    ASSERT_EQ(count_non_finite(got), 0u) << "elements not written (still NaN) or non-finite";
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
