// The calibration sweep planner (include/xstage/probe/sweep_plan.hpp) and the probe data pattern.
#include <gtest/gtest.h>

#include <set>

#include "xstage/model/error.hpp"
#include "xstage/probe/burst_pattern.hpp"
#include "xstage/probe/sweep_plan.hpp"

namespace {

using namespace xstage::probe;

SweepOptions h200_pair(bool quick) {
  SweepOptions o;
  o.quick = quick;
  o.sm_count = 132;
  o.max_producers = 132;
  o.max_volume_bytes = 1ull << 30;
  o.remote_available = true;
  o.path_check = true;
  o.drain_rate_estimate = 393e9;
  o.time_budget_s = quick ? 50 : 540;
  return o;
}

int count(const SweepPlan& p, SweepPhase ph, bool remote) {
  int n = 0;
  for (const auto& x : p.points) n += x.phase == ph && x.remote == remote;
  return n;
}

TEST(SweepPlan, CoversEveryPhaseWithRemoteAndLocalControl) {
  for (bool quick : {true, false}) {
    const SweepOptions o = h200_pair(quick);
    const SweepPlan p = plan_sweep(o);
    EXPECT_GT(count(p, SweepPhase::kZeroGap, true), 8);
    EXPECT_EQ(count(p, SweepPhase::kZeroGap, true), count(p, SweepPhase::kZeroGap, false));
    EXPECT_GE(count(p, SweepPhase::kGapSweep, true), quick ? 9 : 17);
    EXPECT_EQ(count(p, SweepPhase::kGapSweep, true), count(p, SweepPhase::kGapSweep, false));
    EXPECT_GT(count(p, SweepPhase::kGapSweepMma, true), 0);
    EXPECT_EQ(count(p, SweepPhase::kGapSweepMma, false), 0);
    EXPECT_GT(count(p, SweepPhase::kPathCheck, true), 2);
    EXPECT_GE(p.knee_producers.size(), 3u);
    std::set<int> iso_k;
    for (const auto& x : p.points)
      if (x.phase == SweepPhase::kIsolated) iso_k.insert(x.producers);
    EXPECT_EQ(iso_k.size(), p.knee_producers.size());
    EXPECT_LE(p.estimated_seconds, o.time_budget_s);
  }
}

TEST(SweepPlan, GapSweepReachesPastTheRecoveryGap) {
  const SweepOptions o = h200_pair(true);
  const SweepPlan p = plan_sweep(o);
  double gmax = 0, v = 0;
  bool has_zero = false;
  for (const auto& x : p.points)
    if (x.phase == SweepPhase::kGapSweep && x.remote) {
      gmax = std::max(gmax, x.gap_s);
      v = static_cast<double>(x.volume_bytes());
      has_zero |= x.gap_s == 0.0;
      EXPECT_EQ(x.producers, 132);
      EXPECT_EQ(x.bytes_per_producer, 32768u);
    }
  EXPECT_TRUE(has_zero);
  // The plateau needs G ≥ V/R (≥ G* = V/R − T_iss0): 2.5× V/R leaves room for R below the estimate.
  EXPECT_GE(gmax, 2.5 * v / o.drain_rate_estimate * 0.999);
}

TEST(SweepPlan, EveryPointFitsTheBufferAndTheStoreWidth) {
  SweepOptions o = h200_pair(false);
  o.max_volume_bytes = 3ull << 20;
  o.store_bytes = 16;
  const SweepPlan p = plan_sweep(o);
  ASSERT_FALSE(p.points.empty());
  for (const auto& x : p.points) {
    EXPECT_LE(x.volume_bytes(), o.max_volume_bytes);
    EXPECT_EQ(x.bytes_per_producer % 16, 0u);
    EXPECT_GT(x.bursts, 0);
    EXPECT_LE(x.producers, o.max_producers);
  }
}

TEST(SweepPlan, OneGpuPlansTheLocalControlOnlyAndSaysSo) {
  SweepOptions o = h200_pair(true);
  o.remote_available = false;
  o.path_check = true;  // ignored without a peer
  const SweepPlan p = plan_sweep(o);
  for (const auto& x : p.points) EXPECT_FALSE(x.remote);
  EXPECT_GT(count(p, SweepPhase::kIsolated, false), 0);
  EXPECT_GT(count(p, SweepPhase::kGapSweepMma, false), 0);
  ASSERT_FALSE(p.notes.empty());
  EXPECT_NE(p.notes[0].find("no remote measurement"), std::string::npos);
}

TEST(SweepPlan, TightBudgetScalesBurstsDownButKeepsAFloor) {
  SweepOptions o = h200_pair(false);
  const SweepPlan roomy = plan_sweep(o);
  o.per_point_overhead_s = 1e-4;
  o.drain_rate_estimate = 1e9;  // slow drain: every point is long
  o.time_budget_s = 5;
  const SweepPlan tight = plan_sweep(o);
  EXPECT_LT(tight.burst_scale, 1.0);
  for (const auto& x : tight.points) EXPECT_GE(x.bursts, x.periodic ? 16 : 5);
  EXPECT_EQ(roomy.burst_scale, 1.0);
}

TEST(SweepPlan, IsolatedExtensionDoublesReachUntilTheBufferLimit) {
  SweepOptions o = h200_pair(true);
  o.max_volume_bytes = 64ull << 20;
  PlannedPoint last;
  last.phase = SweepPhase::kIsolated;
  last.periodic = false;
  last.producers = 128;
  last.bytes_per_producer = 65536;  // V = 8 MiB
  auto more = extend_isolated(o, last);
  ASSERT_FALSE(more.empty());
  EXPECT_GT(more.front().bytes_per_producer, last.bytes_per_producer);
  EXPECT_LE(more.back().volume_bytes(), 2 * last.volume_bytes());
  EXPECT_GE(more.back().volume_bytes(), last.volume_bytes() * 3 / 2);
  last.bytes_per_producer = (64ull << 20) / 128;  // at the limit
  EXPECT_TRUE(extend_isolated(o, last).empty());
}

TEST(SweepPlan, RejectsBadOptionsNamingTheField) {
  SweepOptions o = h200_pair(true);
  o.sm_count = 0;
  try {
    plan_sweep(o);
    FAIL() << "no throw";
  } catch (const xstage::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("sm_count"), std::string::npos);
  }
  o = h200_pair(true);
  o.store_bytes = 12;
  EXPECT_THROW(plan_sweep(o), xstage::InputError);
  o = h200_pair(true);
  o.drain_rate_estimate = 0;
  EXPECT_THROW(plan_sweep(o), xstage::InputError);
}

TEST(ProbePattern, WordsDifferAcrossPositionBurstProducerSenderAndRun) {
  const std::uint32_t t = burst_tag(1, 0, 0, 0);
  std::set<std::uint32_t> seen;
  for (std::uint32_t w = 0; w < 4096; ++w) seen.insert(pattern_word(t, w));
  EXPECT_EQ(seen.size(), 4096u);  // no two positions of one burst alike: a misplaced store shows
  EXPECT_NE(pattern_word(burst_tag(1, 0, 0, 1), 5), pattern_word(t, 5));  // stale burst
  EXPECT_NE(pattern_word(burst_tag(1, 0, 1, 0), 5), pattern_word(t, 5));  // another producer
  EXPECT_NE(pattern_word(burst_tag(1, 1, 0, 0), 5), pattern_word(t, 5));  // another sender
  EXPECT_NE(pattern_word(burst_tag(2, 0, 0, 0), 5), pattern_word(t, 5));  // another run
  // The poison value (0xa5a5a5a5 / 0x5a5a5a5a) is not what a typical burst writes.
  int poison_hits = 0;
  for (std::uint32_t w = 0; w < 1 << 16; ++w) {
    const auto x = pattern_word(t, w);
    poison_hits += x == 0xa5a5a5a5u || x == 0x5a5a5a5au;
  }
  EXPECT_EQ(poison_hits, 0);
}

}  // namespace
