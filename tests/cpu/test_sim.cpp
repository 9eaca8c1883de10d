// The simulator against eq. 3, 7 and the completion-coupled period, and its input checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "xstage/model/burst_gap.hpp"
#include "xstage/model/error.hpp"
#include "xstage/model/platform.hpp"
#include "xstage/sim/schedule_file.hpp"
#include "xstage/sim/simulator.hpp"

using namespace xstage;

TEST(Simulator, SteadyStateMatchesEq3InTheModelsDomain) {
  std::mt19937 rng(2024);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  int checked = 0, backpressured = 0;
  while (checked < 60) {
    const double r = (200 + 700 * u(rng)) * 1e9;
    const int k = 4 + static_cast<int>(150 * u(rng));
    const double b = 4096 + 128 * 1024 * u(rng);
    const double v = k * b;
    const double t0 = (0.2 + 3.0 * u(rng)) * 1e-6;
    const double g = 1.5 * (v / r) * u(rng);
    const double q = (0.2 + 3.0 * u(rng)) * v;
    const bool rate_ok = model::rate_bound_ok(t0, v, r, g);
    // Domain of eq. 3: backpressured bursts keep the path non-empty through the gap (Q ≥ R·G);
    // recovered bursts stay under the capacity (eq. 10's capacity bound).
    const bool in_domain = rate_ok ? model::capacity_bound_ok(t0, v, r, q) : q >= r * g;
    if (!in_domain) continue;
    const double fill_per_burst = v - r * (t0 + g);
    const int bursts = rate_ok ? 20 : std::min(4000, 40 + static_cast<int>(2.0 * q / fill_per_burst));
    if (!rate_ok && bursts == 4000) continue;
    sim::SimConfig cfg{r, q, false, 0.0, 10.0};
    const auto res = sim::simulate(cfg, sim::periodic_schedules(k, b, t0, g, bursts));
    const auto ss = sim::producer_steady_state(res, k);
    EXPECT_NEAR(ss.issue_time_s / model::issue_time_s(t0, v, r, g), 1.0, 0.02)
        << "R " << r << " K " << k << " B " << b << " T0 " << t0 << " G " << g << " Q " << q;
    EXPECT_NEAR(ss.period_s / model::period_s(t0, v, r, g), 1.0, 0.02);
    EXPECT_LE(res.peak_outstanding_bytes, q * (1 + 1e-9));
    ++checked;
    backpressured += rate_ok ? 0 : 1;
  }
  EXPECT_GT(backpressured, 10);  // both branches exercised
}

TEST(Simulator, IsolatedBurstMatchesEq7) {
  // Proportional share: every producer finishes together, exactly at eq. 7. First-come service: the
  // last producer may finish later by at most its own floor (alone, it cannot issue faster than B/T0).
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  int later = 0;
  for (int i = 0; i < 50; ++i) {
    const double r = (200 + 700 * u(rng)) * 1e9, t0 = (0.2 + 2 * u(rng)) * 1e-6;
    const int k = 8 + static_cast<int>(140 * u(rng));
    const double b = 2048 + 256 * 1024 * u(rng), v = k * b, q = (0.1 + 2 * u(rng)) * v;
    const double eq7 = model::isolated_issue_time_s(t0, v, r, q);
    for (bool proportional : {true, false}) {
      sim::SimConfig cfg{r, q, false, 0.0, 10.0};
      cfg.proportional_share = proportional;
      const auto res = sim::simulate(cfg, sim::periodic_schedules(k, b, t0, 0.0, 1));
      double t_iss = 0;
      for (const auto& br : res.bursts) t_iss = std::max(t_iss, br.issue_end_s);
      if (proportional) {
        EXPECT_NEAR(t_iss / eq7, 1.0, 1e-6);
      } else {
        EXPECT_GE(t_iss, eq7 * (1 - 1e-9));
        EXPECT_LE(t_iss, eq7 + t0 * (1 + 1e-9));
        later += t_iss > eq7 * (1 + 1e-6) ? 1 : 0;
      }
    }
  }
  EXPECT_GT(later, 0);  // the first-come tail exists
}

TEST(Simulator, FirstComeServiceStaggersAnAlignedBurstsProducers) {
  // The isolated bursts measured on the H200 pair: the slowest producer ends at eq. 7, the median one
  // much earlier; the fluid proportional share would end them all together.
  const double r = 378e9, t0 = 0.58e-6, b = 32768, q = 2.0e6;
  const int k = 132;
  const auto res = sim::simulate({r, q, false, 0.0, 10.0}, sim::periodic_schedules(k, b, t0, 0.0, 1));
  std::vector<double> ends;
  for (const auto& br : res.bursts) ends.push_back(br.issue_time_s());
  std::sort(ends.begin(), ends.end());
  EXPECT_LT(ends.front(), 1.01 * t0);
  EXPECT_LT(ends[ends.size() / 2], 0.6 * ends.back());
}

TEST(Simulator, RecurringBurstsThatMeetTheRateBoundRecoverDespiteCapacity) {
  // The embedded platform's gap sweep at K = 132, B = 32 KiB, G = 13.86 µs (+ h): q_peak0 = 4 MiB ≫ Q,
  // yet the measured T_iss is T_iss0 = 0.579 µs: after the first burst the producers stay staggered.
  const model::Platform p = model::default_platform();
  const int k = 132;
  const double b = 32768, t0 = p.issue_floor_s(k, b).value, r = p.drain_rate_at(k), q = p.capacity_bytes(k).value;
  const double g = 13.86e-6 + p.burst_overhead_s;
  ASSERT_FALSE(model::capacity_bound_ok(t0, k * b, r, q));
  const auto res = sim::simulate({r, q, false, 0.0, 10.0}, sim::periodic_schedules(k, b, t0, g, 40));
  const auto ss = sim::producer_steady_state(res, k);
  EXPECT_NEAR(ss.issue_time_s, 0.579e-6, 0.01 * 0.579e-6);
  EXPECT_NEAR(ss.period_s, 14.613e-6, 0.01 * 14.613e-6);
  // Proportional share keeps the bursts aligned and stalls every one of them on Q.
  sim::SimConfig prop{r, q, false, 0.0, 10.0};
  prop.proportional_share = true;
  EXPECT_GT(sim::producer_steady_state(sim::simulate(prop, sim::periodic_schedules(k, b, t0, g, 40)), k).issue_time_s,
            3 * t0);
}

TEST(Simulator, CompletionCoupledPeriodIsGapPlusDrain) {
  const double r = 700e9, t0 = 0.8e-6, b = 32768, g = 3e-6, q = 8e6, lat = 0.5e-6;
  const int k = 132;
  const double v = k * b;
  const auto res = sim::simulate({r, q, true, lat, 10.0}, sim::periodic_schedules(k, b, t0, g, 20));
  const auto ss = sim::producer_steady_state(res, k);
  EXPECT_NEAR(ss.period_s, model::completion_coupled_period_s(v, r, g) + lat, 1e-9);
  // Decoupled (X-Stage) period under the same load is shorter: max(T0 + G, V/R).
  const auto free =
      sim::producer_steady_state(sim::simulate({r, q, false, 0.0, 10.0}, sim::periodic_schedules(k, b, t0, g, 20)), k);
  EXPECT_NEAR(free.period_s, model::period_s(t0, v, r, g), 1e-9);
  EXPECT_LT(free.period_s, ss.period_s);
}

TEST(Simulator, MovingWorkIntoTheGapReducesStallOneForOne) {
  // Eq. 11 in the simulator: with the path full, each µs of gap removes a µs of issue time.
  const double r = 500e9, t0 = 0.5e-6, b = 65536, q = 6e6;
  const int k = 100;
  double prev = -1;
  for (double g : {0.0, 2e-6, 4e-6, 6e-6}) {
    const auto ss = sim::steady_state(sim::simulate({r, q, false, 0, 10}, sim::periodic_schedules(k, b, t0, g, 400)), k);
    if (prev >= 0) EXPECT_NEAR(prev - ss.issue_time_s, 2e-6, 2e-8);
    prev = ss.issue_time_s;
  }
}

TEST(Simulator, HeterogeneousProducers) {
  // Two producers with different schedules: total bytes conserved, and nothing finishes before its floor.
  std::vector<sim::ProducerSchedule> s = {
      {sim::Step::burst(1e6, 1e-6), sim::Step::compute(2e-6), sim::Step::burst(2e6, 2e-6)},
      {sim::Step::compute(0.5e-6), sim::Step::burst(3e6, 1e-6)},
  };
  const auto res = sim::simulate({100e9, 1e6, false, 0, 1}, s);
  ASSERT_EQ(res.bursts.size(), 3u);
  for (const auto& b : res.bursts) EXPECT_GE(b.issue_time_s(), b.issue_floor_s - 1e-15);
  // Everything (6 MB) must have been accepted; with Q = 1 MB at 100 GB/s at least 50 µs pass.
  EXPECT_GE(res.makespan_s, (6e6 - 1e6) / 100e9 - 1e-12);
}

TEST(Simulator, BadInput) {
  EXPECT_THROW(sim::simulate({0, 1e6, false, 0, 1}, sim::periodic_schedules(1, 1, 1e-6, 0, 2)), InputError);
  EXPECT_THROW(sim::simulate({1e9, -1, false, 0, 1}, sim::periodic_schedules(1, 1, 1e-6, 0, 2)), InputError);
  EXPECT_THROW(sim::simulate({1e9, 1e6, false, 0, 1}, {}), InputError);
  EXPECT_THROW(sim::simulate({1e9, 1e6, false, 0, 1}, {{sim::Step::burst(-1, 1e-6)}}), InputError);
  EXPECT_THROW(sim::periodic_schedules(0, 1, 1e-6, 0, 2), InputError);
  EXPECT_THROW(sim::periodic_schedules(2, 1, 1e-6, 0, 0), InputError);
  // A schedule that runs past the time limit is an error, not a hang.
  EXPECT_THROW(sim::simulate({1e9, 1e6, false, 0, 1e-3}, {{sim::Step::compute(1.0)}}), InputError);
}

// The time bound of a fixed-size simulation covers the schedule (serial steps plus drain), at least 1 s and at most
// kMaxSimulatedTimeS: a long but progressing schedule finishes, one longer than the cap is TimeLimitError.
TEST(Simulator, ScheduleTimeBoundCoversTheSchedule) {
  sim::SimConfig cfg{400e9, 2e6, false, 0, 1};
  const auto small = sim::periodic_schedules(8, 65536, 1e-6, 2e-6, 10);
  EXPECT_EQ(sim::schedule_time_bound_s(cfg, small), 1.0);
  // 16 producers x 4.3 GB over 40 bursts: about 7 s of drain, past the 1 s a record's simulation used to get.
  const auto big = sim::periodic_schedules(16, 4294967428.0, 1e-6, 0.0, 40);
  cfg.time_limit_s = sim::schedule_time_bound_s(cfg, big);
  const double drain_s = 40 * 16 * 4294967428.0 / 400e9;
  EXPECT_GE(cfg.time_limit_s, drain_s);
  const sim::SimResult r = sim::simulate(cfg, big);
  EXPECT_NEAR(r.makespan_s, drain_s, 1e-3 * drain_s);
  EXPECT_LT(r.makespan_s, cfg.time_limit_s);
  // Longer than the cap: the bound is the cap and the simulation stops there, named as a time limit.
  const auto huge = sim::periodic_schedules(16, 1e12, 1e-6, 0.0, 40);
  cfg.time_limit_s = sim::schedule_time_bound_s(cfg, huge);
  EXPECT_EQ(cfg.time_limit_s, sim::kMaxSimulatedTimeS);
  EXPECT_THROW(sim::simulate(cfg, huge), sim::TimeLimitError);
}

TEST(ScheduleFile, ExpandsGroupsAndMatchesThePeriodicSchedule) {
  const model::Platform platform = model::default_platform();
  const auto j = nlohmann::json::parse(R"({"schema": "xstage.schedule/1", "producers": [
      {"count": 8, "repeat": 5, "steps": [{"burst_bytes": 32768}, {"compute_us": 2.0}]},
      {"steps": [{"compute_us": 1.0}, {"burst_bytes": 4096, "issue_floor_us": 0.5}]}]})");
  const auto s = sim::schedules_from_json(j, platform, "s.json");
  ASSERT_EQ(s.size(), 9u);
  ASSERT_EQ(s[0].size(), 10u);
  EXPECT_EQ(s[0][0].kind, sim::Step::Kind::kBurst);
  EXPECT_DOUBLE_EQ(s[0][0].issue_floor_s, platform.issue_floor_s(9, 32768).value);  // default: T_iss0 at (K = 9, B)
  EXPECT_DOUBLE_EQ(s[0][1].duration_s, 2e-6);
  EXPECT_DOUBLE_EQ(s[8][1].issue_floor_s, 0.5e-6);
  // The file form of a periodic schedule simulates exactly like periodic_schedules.
  const auto p = nlohmann::json::parse(R"({"schema": "xstage.schedule/1", "producers": [
      {"count": 16, "repeat": 12, "steps": [{"burst_bytes": 65536, "issue_floor_us": 0.7}, {"compute_us": 1.5}]}]})");
  const sim::SimConfig cfg{400e9, 2e6, false, 0, 1};
  const auto a = sim::simulate(cfg, sim::schedules_from_json(p, platform, "p.json"));
  const auto b = sim::simulate(cfg, sim::periodic_schedules(16, 65536, 0.7e-6, 1.5e-6, 12));
  EXPECT_DOUBLE_EQ(a.makespan_s, b.makespan_s);
  EXPECT_DOUBLE_EQ(a.total_stall_s, b.total_stall_s);
}

TEST(ScheduleFile, BadInputNamesTheField) {
  const model::Platform platform = model::default_platform();
  auto error_of = [&](const char* text) {
    try {
      sim::schedules_from_json(nlohmann::json::parse(text), platform, "s.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of(R"({"schema": "xstage.schedule/2", "producers": []})").find("s.json: schema: unknown schema"), std::string::npos);
  EXPECT_NE(error_of(R"({"schema": "xstage.schedule/1"})").find("producers: missing"), std::string::npos);
  EXPECT_NE(error_of(R"({"schema": "xstage.schedule/1", "producers": [{"count": 0, "steps": [{"compute_us": 1}]}]})")
                .find("producers[0].count: must be an integer in 1..100000, got 0"), std::string::npos);
  EXPECT_NE(error_of(R"({"schema": "xstage.schedule/1", "producers": [{"steps": [{"compute_us": -1}]}]})")
                .find("producers[0].steps[0].compute_us: must be >= 0 and < 1e+06 us, got -1"), std::string::npos);
  EXPECT_NE(error_of(R"({"schema": "xstage.schedule/1", "producers": [{"steps": [{"burst_bytes": "4k"}]}]})")
                .find("producers[0].steps[0].burst_bytes: must be a number"), std::string::npos);
  EXPECT_NE(error_of(R"({"schema": "xstage.schedule/1", "producers": [{"steps": [{"burst_bytes": 8, "compute_us": 1}]}]})")
                .find("needs exactly one of compute_us or burst_bytes"), std::string::npos);
  EXPECT_NE(error_of(R"({"schema": "xstage.schedule/1", "producers": [{"steps": [{"gap_us": 1}]}]})")
                .find("producers[0].steps[0]: needs exactly one"), std::string::npos);
  EXPECT_NE(error_of(R"({"schema": "xstage.schedule/1", "producers": [{"steps": []}]})")
                .find("producers[0].steps: must be a non-empty array"), std::string::npos);
  EXPECT_NE(error_of(R"({"schema": "xstage.schedule/1", "producers": [{"steps": [{"compute_us": 1}], "x": 1}]})")
                .find("producers[0].x: unknown field"), std::string::npos);
  EXPECT_NE(error_of(R"({"schema": "xstage.schedule/1", "producers": [{"steps": [{"burst_bytes": 1e300}]}]})")
                .find("producers[0].steps[0].burst_bytes: must be >= 1 and <= 1e+12 bytes, got 1e+300"), std::string::npos);
  EXPECT_NE(error_of(R"({"schema": "xstage.schedule/1", "producers": [{"steps": [{"burst_bytes": 8, "issue_floor_us": 2e6}]}]})")
                .find("producers[0].steps[0].issue_floor_us: must be > 0 and < 1e+06 us, got 2000000"), std::string::npos);
  EXPECT_NE(error_of(R"({"schema": "xstage.schedule/1", "producers": [{"count": 9999999999, "steps": [{"compute_us": 1}]}]})")
                .find("producers[0].count: must be an integer in 1..100000, got 9999999999"), std::string::npos);
  EXPECT_NE(error_of(R"({"schema": "xstage.schedule/1", "producers": [{"repeat": 2.5, "steps": [{"compute_us": 1}]}]})")
                .find("producers[0].repeat: must be an integer in 1..1000000, got 2.5"), std::string::npos);
  // Sizes are bounded before anything is expanded: producers over all groups, and steps in all.
  EXPECT_NE(error_of(R"({"schema": "xstage.schedule/1", "producers": [{"count": 100000, "steps": [{"compute_us": 1}]},
               {"count": 100000, "steps": [{"compute_us": 1}]}, {"count": 100000, "steps": [{"compute_us": 1}]},
               {"count": 100000, "steps": [{"compute_us": 1}]}, {"count": 100000, "steps": [{"compute_us": 1}]},
               {"count": 100000, "steps": [{"compute_us": 1}]}, {"count": 100000, "steps": [{"compute_us": 1}]},
               {"count": 100000, "steps": [{"compute_us": 1}]}, {"count": 100000, "steps": [{"compute_us": 1}]},
               {"count": 100000, "steps": [{"compute_us": 1}]}, {"count": 1, "steps": [{"compute_us": 1}]}]})")
                .find("producers[10].count: producers of all groups must be at most 1000000, got 1000001"), std::string::npos);
  EXPECT_NE(error_of(R"({"schema": "xstage.schedule/1", "producers": [{"count": 100000, "repeat": 1000000, "steps": [{"compute_us": 1}]}]})")
                .find("producers[0]: count x repeat x steps of all groups must be at most 10000000"), std::string::npos);
  EXPECT_THROW(sim::load_schedule_file("/nonexistent.json", platform), InputError);
}

TEST(Simulator, WaitBlocksUntilTheCounterReachesItsTarget) {
  // Producer 0 computes 3 us then signals; producer 1 waits for it, then computes 1 us; producer 2
  // signals twice and finishes at once. A wait for two signals from producers 0 and 2 ends at 3 us.
  const std::vector<sim::ProducerSchedule> s = {
      {sim::Step::compute(3e-6), sim::Step::signal(0)},
      {sim::Step::wait(0, 3), sim::Step::compute(1e-6)},
      {sim::Step::signal(0), sim::Step::signal(0)},
  };
  const sim::SimResult r = sim::simulate({400e9, 1e6, false, 0.0, 1.0}, s);
  EXPECT_NEAR(r.makespan_s, 4e-6, 1e-15);
  EXPECT_NEAR(r.total_dependency_wait_s, 3e-6, 1e-15);
  // Signals released before the wait starts count too: no wait at all.
  const sim::SimResult r2 = sim::simulate({400e9, 1e6, false, 0.0, 1.0},
                                          {{sim::Step::signal(5), sim::Step::compute(1e-6)}, {sim::Step::compute(2e-6), sim::Step::wait(5, 1)}});
  EXPECT_NEAR(r2.makespan_s, 2e-6, 1e-15);
  EXPECT_NEAR(r2.total_dependency_wait_s, 0.0, 1e-15);
}

TEST(Simulator, UnsatisfiableWaitIsReportedAsDeadlock) {
  EXPECT_THROW(sim::simulate({400e9, 1e6, false, 0.0, 1.0}, {{sim::Step::wait(0, 2)}, {sim::Step::signal(0)}}),
               InputError);
  EXPECT_THROW(sim::simulate({400e9, 1e6, false, 0.0, 1.0}, {{sim::Step::wait(-1, 1)}}), InputError);
}

TEST(Simulator, RampedDrainFollowsTheSmoothKnee) {
  // With proportional share every producer ends together, at the closed form's T (steps of τ/16 make
  // the simulated ramp slightly faster or slower: within 2 %).
  const double r = 330e9, t0 = 0.3e-6, tau = 1.8e-6, q = 2.0e6;
  const int k = 132;
  for (double b : {20640.0, 32768.0, 65536.0, 131072.0}) {
    sim::SimConfig cfg{r, q, false, 0.0, 10.0};
    cfg.proportional_share = true;
    cfg.drain_ramp_s = tau;
    const auto res = sim::simulate(cfg, sim::periodic_schedules(k, b, t0, 0.0, 1));
    double t_iss = 0;
    for (const auto& br : res.bursts) t_iss = std::max(t_iss, br.issue_end_s);
    EXPECT_NEAR(t_iss / model::isolated_issue_time_ramped_s(t0, k * b, r, q, tau), 1.0, 0.02) << b;
  }
}
