// Eq. 15 as a check that can fail: a planted MoE schedule whose per-tile compute stall is known by hand, through
// the code that predicts Table 2's stalls (sim::predict_moe_orders with an epilogue issuer and two accumulator
// slots, as `xstage paper`'s table2 rows and `plan moe --simulate`). A Linear-2 tile's producer waits at entry for
// the slot of the tile two back, so in steady state it stalls Δt = [T_RS − T_cover]_+ per tile (eq. 15), with
// T_cover the Linear-2 mainloop in between and T_RS = staging + T_iss, T_iss from eq. 3 with the issuer's gap
// between bursts (its staging) as G.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "xstage/model/burst_gap.hpp"
#include "xstage/model/platform.hpp"
#include "xstage/sim/moe_order_simulation.hpp"

using namespace xstage;

namespace {

constexpr double kBytes = 65536;      // Combine bytes of one Linear-2 tile per CTA
constexpr int kCtas = 2;              // one CTA pair: two aligned issuers
constexpr double kRate = 32.768e9;    // R: the pair's aggregate 2 x 64 KiB drains in 4 us
constexpr double kT0 = 1e-6;          // T_iss0 of one tile's burst
constexpr double kStaging = 0.5e-6;   // the issuer's staging of a tile
constexpr double kTl1 = 3e-6;         // Linear-1 mainloop (>= staging: the issuer keeps up through Linear-1)

model::Platform planted_platform() {
  return model::platform_from_json(nlohmann::json::parse(R"({
    "schema": "xstage.platform/1", "name": "planted-stall",
    "drain_rate_gbps": 32.768,
    "issue_floor": [{"producers": 2, "bytes_per_producer": 65536, "t_iss0_us": 1.0}],
    "capacity": [{"producers": 2, "bytes": 65536}]})"),
                                   "planted");
}

// One expert of 32 rows, 2 + 2 N-tiles per row, one CTA pair: the expert-wave order runs every Linear-1 tile,
// then 32 Linear-2 tiles back to back on each CTA.
sim::MoeOrderPrediction simulate(double t_l2_s) {
  sim::MoeOrderParams p;
  p.rows_per_expert = {32};
  p.n1 = 2;
  p.n2 = 2;
  p.n2_real = 2;
  p.instances = kCtas / 2;
  p.lead_rows = 1;
  p.experts_per_wave = 1;
  sim::MoeTileCosts c{kTl1, t_l2_s, kBytes, kT0};
  c.staging_s = kStaging;
  c.cover_slots = 2;
  return sim::predict_moe_orders(planted_platform(), p, c);
}

// Eq. 3 + eq. 15 by hand for a saturated issuer (its gap between bursts is its staging).
double hand_stall_s(double t_l2_s) {
  const double v = kCtas * kBytes;
  const double overhead = model::issue_overhead_s(kT0, v, kRate, kStaging);  // eq. 4 with G = staging
  const double t_rs = model::remote_store_span_s(kT0, overhead, kStaging);    // eq. 15's T_RS
  return model::per_tile_stall_s(t_rs, t_l2_s);
}

}  // namespace

TEST(StallCheck, PlantedDrainLimitedStallIsEq15) {
  // V/R = 4 us: T_iss = 4 − 0.5 = 3.5 us, T_RS = 4 us; T_L2 = 2.5 us → Δt = 1.5 us per tile.
  const double t_l2 = 2.5e-6;
  const double expect = hand_stall_s(t_l2);
  ASSERT_NEAR(expect, 1.5e-6, 1e-15);
  const sim::MoeOrderPrediction o = simulate(t_l2);
  ASSERT_TRUE(o.wave.roles);
  EXPECT_EQ(o.wave.l2_tiles, 64);
  EXPECT_NEAR(o.wave.median_mma_stall_s, expect, 1e-12);  // exact up to rounding
  // The span the stall comes from: T_RS of the steady state.
  EXPECT_NEAR(o.wave.median_tile_span_s, kStaging + model::issue_time_s(kT0, kCtas * kBytes, kRate, kStaging), 1e-12);
}

TEST(StallCheck, PlantedBackpressureFreeStallIsEq15) {
  // A faster path (V/R below T_iss0 + staging) leaves T_RS = staging + T_iss0 = 1.5 us; T_L2 = 1 us → 0.5 us.
  auto j = nlohmann::json::parse(R"({"schema": "xstage.platform/1", "name": "planted-fast", "drain_rate_gbps": 1000.0,
    "issue_floor": [{"producers": 2, "bytes_per_producer": 65536, "t_iss0_us": 1.0}],
    "capacity": [{"producers": 2, "bytes": 1e9}]})");
  sim::MoeOrderParams p;
  p.rows_per_expert = {32};
  p.n1 = 2;
  p.n2 = 2;
  p.n2_real = 2;
  p.instances = 1;
  p.lead_rows = 1;
  p.experts_per_wave = 1;
  sim::MoeTileCosts c{kTl1, 1e-6, kBytes, kT0};
  c.staging_s = kStaging;
  c.cover_slots = 2;
  const auto o = sim::predict_moe_orders(model::platform_from_json(j, "planted"), p, c);
  const double expect = model::per_tile_stall_s(model::remote_store_span_s(kT0, 0.0, kStaging), 1e-6);
  ASSERT_NEAR(expect, 0.5e-6, 1e-15);
  EXPECT_NEAR(o.wave.median_mma_stall_s, expect, 1e-12);  // exact up to rounding
  EXPECT_NEAR(o.wave.median_tile_span_s, 1.5e-6, 1e-12);
}

TEST(StallCheck, CoveredStoreSpanStallsZero) {
  // T_L2 = 5 us covers the drain (V/R = 4 us <= T_L2): T_RS <= T_L2 and eq. 15 gives 0; so must the simulator.
  const double t_l2 = 5e-6;
  EXPECT_EQ(hand_stall_s(t_l2), 0.0);
  const sim::MoeOrderPrediction o = simulate(t_l2);
  EXPECT_LT(o.wave.median_mma_stall_s, 1e-12);
  EXPECT_GT(o.wave.median_tile_span_s, kT0);  // the stores still take time; the cover hides them
  EXPECT_LT(o.wave.median_tile_span_s, t_l2);
}
