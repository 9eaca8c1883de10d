// The fused MoE layer (one persistent kernel per GPU: in-kernel dispatch, GEMMs with SwiGLU, combine)
// against the CPU reference: fresh random inputs each run, output and combine rows poisoned (NaN) first,
// balanced and skewed routing, experts (and a whole rank) without tokens, an odd Linear-2 tile count,
// both schedules, and run-to-run determinism (also across the epochs of repeated runs).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_support.hpp"
#include "moe_test_support.hpp"
#include "moe_fused.hpp"
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
  MoeFusedSchedule schedule;
  int tokens;
  int lead_rows;  // interleaved D (0: D_knee)
};

class MoeFusedTest : public ::testing::TestWithParam<Case> {};

TEST_P(MoeFusedTest, MatchesCpuReference) {
  REQUIRE_GPUS(2);
  const Case c = GetParam();
  auto team = comm::Team::single_process({0, 1});
  // hidden 384: three Linear-2 N-tiles (odd: one CTA of a pair skips the padding tile); h_inter 256:
  // four Linear-1 N-tiles. 8 experts, top-3.
  MoeDims d{2, c.tokens, 384, 256, 8, 3};
  MoeFusedOptions opt;
  opt.schedule = c.schedule;
  opt.lead_rows = c.lead_rows;
  MoeFused layer(team, d, opt);
  std::mt19937_64 rng(std::random_device{}());
  const auto ref = load_random_inputs(layer, d, c.routing, rng);

  std::vector<float> first;
  for (int pass = 0; pass < 3; ++pass) {
    layer.poison_output();
    layer.run(20.0);
    const std::vector<float> got = all_outputs(layer, d);
    ASSERT_EQ(count_non_finite(got), 0u) << "elements not written (still NaN) or non-finite, pass " << pass;
    const double err = relative_l2_error(got.data(), ref.data(), ref.size());
    EXPECT_LT(err, 1e-2) << c.name << " pass " << pass;
    if (pass == 0) {
      const auto rows = layer.last_received_rows();
      std::printf("[moe fused] %s: schedule %s (param %d, grid %d), rel_l2 %.3e, rows received %lld + %lld\n", c.name,
                  to_string(layer.schedule()), layer.schedule_param(), layer.grid(), err, rows[0], rows[1]);
      first = got;
      EXPECT_EQ(rows[0] + rows[1], (long long)d.ranks * d.tokens * d.top_k);
      if (c.routing == RoutingKind::kAllToRankZero) EXPECT_EQ(rows[1], 0);
    } else {
      EXPECT_EQ(got, first) << "pass " << pass << " differs from the first: not deterministic";
    }
  }
  for (double ms : layer.last_ms()) EXPECT_GT(ms, 0.0);
}

INSTANTIATE_TEST_SUITE_P(
    Routings, MoeFusedTest,
    ::testing::Values(Case{"balanced_interleaved", RoutingKind::kBalanced, MoeFusedSchedule::kInterleaved, 96, 0},
                      Case{"balanced_wave", RoutingKind::kBalanced, MoeFusedSchedule::kWave, 96, 0},
                      Case{"skewed_interleaved", RoutingKind::kSkewed, MoeFusedSchedule::kInterleaved, 96, 0},
                      Case{"skewed_wave", RoutingKind::kSkewed, MoeFusedSchedule::kWave, 96, 0},
                      Case{"cold_experts_interleaved", RoutingKind::kColdExperts, MoeFusedSchedule::kInterleaved, 96, 0},
                      Case{"cold_experts_wave", RoutingKind::kColdExperts, MoeFusedSchedule::kWave, 96, 0},
                      Case{"all_to_rank0_interleaved", RoutingKind::kAllToRankZero, MoeFusedSchedule::kInterleaved, 96, 0},
                      Case{"all_to_rank0_wave", RoutingKind::kAllToRankZero, MoeFusedSchedule::kWave, 96, 0},
                      Case{"multi_block_interleaved_d1", RoutingKind::kBalanced, MoeFusedSchedule::kInterleaved, 700, 1},
                      Case{"multi_block_wave", RoutingKind::kSkewed, MoeFusedSchedule::kWave, 700, 0}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

}  // namespace
