// Formulas of MODEL.md against the paper's numbers, and their properties.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <map>
#include <random>
#include <string>

#include "xstage/model/burst_gap.hpp"
#include "xstage/model/units.hpp"
#include "xstage/model/workloads.hpp"

using namespace xstage::model;
using xstage::units::kMiB;

namespace {
constexpr double kR = 717e9;                // paper: 717 GB/s
constexpr double kT0 = 0.76e-6;             // T_iss0 at K = 148, B = 32 KiB
constexpr double kV = 148.0 * 32 * 1024;    // 4,849,664 B
constexpr double kQ = 148.0 * 33 * 1024 - kR * kT0;  // from the 33 KiB knee
}  // namespace

TEST(PaperVectors, VolumeAndRecoveryGap) {
  EXPECT_DOUBLE_EQ(burst_volume_bytes(148, 32 * 1024), 4849664.0);
  EXPECT_NEAR(recovery_gap_s(kT0, kV, kR) * 1e6, 6.0, 0.01);  // G* ≈ 6.0 µs
  EXPECT_NEAR(drain_time_s(kV, kR) * 1e6, 6.764, 0.001);
}

TEST(PaperVectors, PeakOutstandingAndCapacity) {
  EXPECT_NEAR(peak_outstanding_bytes(kT0, kV, kR) / kMiB, 4.105, 0.005);  // ≈ 4.1 MiB
  const double v_knee = 148.0 * 33 * 1024;
  EXPECT_NEAR(v_knee / kMiB, 4.77, 0.005);
  EXPECT_NEAR(capacity_from_knee_bytes(kT0, v_knee, kR) / kMiB, 4.25, 0.005);  // Q ≈ 4.25 MiB
  EXPECT_DOUBLE_EQ(knee_volume_bytes(kT0, kR, kQ), v_knee);
}

TEST(PaperVectors, SufficientSequenceLength) {
  // FA4 audit: b_n = 128, σ = 0.79 µs → M_ub* = 128·ceil(6.0/0.79) = 1024.
  EXPECT_EQ(sufficient_seq_len_tokens(recovery_gap_s(kT0, kV, kR), 0.79e-6, 128), 1024);
}

TEST(PaperVectors, Table2PerTileStall) {
  // Eq. 15 with measured spans: wave 9.93 vs L2 5.30 → 4.63; DSv4-Pro 7.88 vs 9.54 → 0.
  EXPECT_NEAR(per_tile_stall_s(9.93e-6, 5.30e-6) * 1e6, 4.63, 1e-9);
  EXPECT_EQ(per_tile_stall_s(7.88e-6, 9.54e-6), 0.0);
  EXPECT_EQ(per_tile_stall_s(3.77e-6, 9.77e-6), 0.0);
}

TEST(PaperVectors, Table3Metrics) {
  // FA4 + A2A at M = 8192: FA 85.4, serial 140.9, fused 99.4 µs → H = 75 %, speedup 1.417x.
  EXPECT_NEAR(hiding_ratio(99.4, 85.4, 140.9), 0.75, 0.005);
  EXPECT_NEAR(speedup(140.9, 99.4), 1.417, 0.001);
  EXPECT_NEAR(residual_s(99.4, 85.4), 14.0, 1e-9);
  EXPECT_NEAR(ideal_speedup(140.9 - 85.4, 85.4), 1.65, 0.001);
}

TEST(Equations, IssueTimeBranches) {
  EXPECT_DOUBLE_EQ(issue_time_s(kT0, kV, kR, 0.0), drain_time_s(kV, kR));  // G = 0: drain-limited
  EXPECT_DOUBLE_EQ(issue_time_s(kT0, kV, kR, 1.0), kT0);                   // large G: the floor
  EXPECT_DOUBLE_EQ(issue_time_s(kT0, kV, kR, recovery_gap_s(kT0, kV, kR)), kT0);  // recovers exactly at G*
  EXPECT_NEAR(issue_overhead_s(kT0, kV, kR, 0.0), recovery_gap_s(kT0, kV, kR), 1e-15);
  // eq. 2 and the period law agree: T_period = T_iss + G.
  for (double g : {0.0, 1e-6, 3e-6, 6e-6, 10e-6})
    EXPECT_NEAR(period_s(kT0, kV, kR, g), period_from_issue_s(issue_time_s(kT0, kV, kR, g), g), 1e-15);
  EXPECT_DOUBLE_EQ(completion_coupled_period_s(kV, kR, 2e-6), 2e-6 + kV / kR);
}

TEST(Equations, IsolatedKnee) {
  EXPECT_DOUBLE_EQ(isolated_issue_time_s(kT0, 1e6, kR, kQ), kT0);  // below the knee
  const double v = 8 * kMiB;
  EXPECT_DOUBLE_EQ(isolated_issue_time_s(kT0, v, kR, kQ), (v - kQ) / kR);
  // At the knee both branches meet.
  const double vk = knee_volume_bytes(kT0, kR, kQ);
  EXPECT_NEAR((vk - kQ) / kR, kT0, 1e-15);
}

TEST(Equations, DesignTest) {
  const DesignVerdict zero_gap = design_test(kT0, kV, kR, kQ, 0.0);
  EXPECT_FALSE(zero_gap.rate_bound_ok);
  EXPECT_TRUE(zero_gap.capacity_bound_ok);  // 4.1 MiB ≤ 4.25 MiB
  EXPECT_EQ(zero_gap.action, DesignAction::kReshape);
  const DesignVerdict enough = design_test(kT0, kV, kR, kQ, 6.1e-6);
  EXPECT_TRUE(enough.rate_bound_ok);
  EXPECT_EQ(enough.action, DesignAction::kKeep);
  const DesignVerdict too_big = design_test(kT0, 2 * kV, kR, kQ, 1.0);
  EXPECT_TRUE(too_big.rate_bound_ok);
  EXPECT_FALSE(too_big.capacity_bound_ok);
  EXPECT_EQ(too_big.action, DesignAction::kReshape);
  EXPECT_STREQ(to_string(DesignAction::kKeep), "keep");
}

TEST(Equations, DrainDominatedTradesGapOneForOne) {
  const double g1 = 1e-6, g2 = 2e-6;
  EXPECT_NEAR(drain_dominated_issue_time_s(kV, kR, g1) - drain_dominated_issue_time_s(kV, kR, g2), g2 - g1, 1e-15);
  EXPECT_NEAR(drain_dominated_issue_time_s(kV, kR, g1) + g1, drain_time_s(kV, kR), 1e-15);
}

TEST(Equations, Moe) {
  EXPECT_DOUBLE_EQ(moe_wave_gap_s(5e-6), 5e-6);
  EXPECT_DOUBLE_EQ(moe_interleaved_gap_s(8e-6, 5e-6, 2, 4), 5e-6 + 4e-6);
  EXPECT_DOUBLE_EQ(moe_interleaved_issue_overhead_s(5e-6, 8e-6, 1, 4), 3e-6);
  EXPECT_DOUBLE_EQ(moe_interleaved_issue_overhead_s(5e-6, 8e-6, 1, 1), 0.0);
  // eq. 14 ⇔ the interleaved gap reaches G*.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0.1, 20.0);
  for (int i = 0; i < 200; ++i) {
    const double t1 = u(rng) * 1e-6, t2 = u(rng) * 1e-6, n1 = u(rng), n2 = u(rng), v = u(rng) * kMiB;
    const bool eq14 = moe_interleaving_sufficient(kT0, v, kR, t1, t2, n1, n2);
    const bool recovered = moe_interleaved_gap_s(t1, t2, n1, n2) >= recovery_gap_s(kT0, v, kR);
    EXPECT_EQ(eq14, recovered);
  }
  EXPECT_EQ(moe_lead_knee_rows(128, 132, 2048), 5);   // ceil(16896/4096)
  EXPECT_EQ(moe_lead_knee_rows(128, 148, 1536), 7);   // ceil(18944/3072)
  EXPECT_DOUBLE_EQ(remote_store_span_s(1e-6, 2e-6, 0.5e-6), 3.5e-6);
}

// The interleaved order's default lead, max(D_knee, ceil(G / P_1) + 1 + ceil(G·h_inter / (P_1·hidden)))
// with G = producers / 2 and P_1 = ceil(h_inter / b_n), at the fused layer's grid (132 CTAs, b_n = 128)
// for every built-in shape.
TEST(Equations, MoeDefaultLeadOfBuiltInShapes) {
  // {D_knee, default}: G = 66; P_1 = 12 (h_inter 1536), 16 (2048), 24 (3072), 44 (5632).
  const std::map<std::string, std::pair<int, int>> expected = {
      {"deepseek-v4-flash", {5, 9}},  // ceil(16896/4096) = 5; 5 + 1 + ceil(66·2048/(16·4096) = 2.06) = 9
      {"deepseek-v4-pro", {3, 6}},    // ceil(16896/6144) = 3; 3 + 1 + ceil(66·3072/(24·7168) = 1.18) = 6
      {"deepseek-v3", {5, 8}},        // 5 + 1 + ceil(66·2048/(16·7168) = 1.18) = 8
      {"qwen3-235b-a22b", {6, 10}},   // ceil(16896/3072) = 6; 6 + 1 + ceil(66·1536/(12·4096) = 2.06) = 10
      {"mimo-v2-flash", {5, 9}},      // hidden 4096, h_inter 2048: as deepseek-v4-flash
      {"dit-moe-g2-16e2a", {2, 9}},   // ceil(16896/11264) = 2; 2 + 1 + 66·5632/(44·1408) = 6 exactly: 9
      {"glm-4.5", {6, 9}},            // 6 + 1 + ceil(66·1536/(12·5120) = 1.65) = 9
  };
  EXPECT_EQ(builtin_moe_shapes().size(), expected.size());
  for (const auto& shape : builtin_moe_shapes()) {
    SCOPED_TRACE(shape.name);
    const auto it = expected.find(shape.name);
    ASSERT_NE(it, expected.end()) << "new built-in shape: add its expected lead";
    const double h = shape.h_inter, pairs = std::ceil(h / 128.0);
    const double knee = std::ceil(128.0 * 132.0 / (2.0 * h));
    const double dep_floor = std::ceil(66.0 / pairs) + 1.0 + std::ceil(66.0 * h / (pairs * shape.hidden));
    EXPECT_EQ(knee, it->second.first);
    EXPECT_EQ(std::max(knee, dep_floor), it->second.second);
    EXPECT_EQ(moe_lead_knee_rows(128, 132, shape.h_inter), it->second.first);
    EXPECT_EQ(moe_default_lead_rows(128, 132, shape.h_inter, shape.hidden), it->second.second);
  }
  static_assert(moe_default_lead_rows(128, 132, 5632, 1408) == 9);
  // An odd producer count leaves its last CTA unpaired: G = 66 at 133 producers as at 132.
  EXPECT_EQ(moe_default_lead_rows(128, 133, 5632, 1408), 9);
  // A single producer is one instance: ceil(1 / 44) + 1 + ceil(5632 / (44·1408)) = 3 > D_knee = 1.
  EXPECT_EQ(moe_default_lead_rows(128, 1, 5632, 1408), 3);
  // The skew term grows with h_inter / hidden: hidden 5632 instead of 1408 gives 2 + 1 + ceil(1.5) = 5.
  EXPECT_EQ(moe_default_lead_rows(128, 132, 5632, 5632), 5);
  // D_knee decides where a partial N-tile rounds P_1 up: h_inter 100, P_1 = 1, floor 66 + 1 + 2 = 69,
  // D_knee ceil(16896/200) = 85; h_inter 192, P_1 = 2, floor 33 + 1 + 2 = 36, D_knee ceil(16896/384) = 44.
  EXPECT_EQ(moe_default_lead_rows(128, 132, 100, 4096), 85);
  EXPECT_EQ(moe_default_lead_rows(128, 132, 192, 4096), 44);
  // Never below D_knee; exactly D_knee + 1 + the skew rows where b_n divides h_inter and every producer
  // has a partner (then ceil(G / P_1) is D_knee's own quotient).
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> bn_pick(0, 2), producers(1, 300), h(1, 64), hid(1, 128);
  for (int i = 0; i < 500; ++i) {
    const std::int64_t bn = 64 << bn_pick(rng), k = producers(rng), hi = h(rng) * 64, hd = hid(rng) * 64;
    const std::int64_t d = moe_default_lead_rows(bn, k, hi, hd), knee = moe_lead_knee_rows(bn, k, hi);
    EXPECT_GE(d, knee) << bn << " " << k << " " << hi << " " << hd;
    if (hi % bn == 0 && k % 2 == 0) {
      const double g = double(k / 2), pairs = double(hi / bn);
      const std::int64_t skew = std::int64_t(std::ceil(g * double(hi) / (pairs * double(hd)) - 1e-9));
      EXPECT_EQ(d, knee + 1 + skew) << bn << " " << k << " " << hi << " " << hd;
    }
  }
}

// The PyTorch GEMM baseline (bench/moe/moe_grouped_mm.py) repeats the built-in MoE shapes in its SHAPES table:
// every built-in shape is there with the same hidden, h_inter, experts and top-k.
TEST(Workloads, TorchGemmBaselineKnowsEveryBuiltInMoeShape) {
  std::ifstream in(std::string(XSTAGE_SOURCE_DIR) + "/bench/moe/moe_grouped_mm.py");
  ASSERT_TRUE(in) << "bench/moe/moe_grouped_mm.py not found";
  std::stringstream text;
  text << in.rdbuf();
  const std::string py = text.str();
  for (const auto& shape : builtin_moe_shapes()) {
    const std::string entry = "\"" + std::string(shape.name) + "\": (" + std::to_string(shape.hidden) + ", " +
                              std::to_string(shape.h_inter) + ", " + std::to_string(shape.experts) + ", " +
                              std::to_string(shape.top_k) + ")";
    EXPECT_NE(py.find(entry), std::string::npos) << "missing or different in bench/moe/moe_grouped_mm.py: " << entry;
  }
}

TEST(Equations, Attention) {
  EXPECT_EQ(kv_tiles(8192, 128), 64);
  EXPECT_EQ(kv_tiles(14850, 128), 117);
  EXPECT_DOUBLE_EQ(attention_tile_flop(128, 128, 128, 8192), 4.0 * 128 * 128 * 128 * 64);
  EXPECT_EQ(attention_equivalent_depth(128, 8192, 128), 2 * 128 * 64);
  EXPECT_DOUBLE_EQ(qloop_gap_lower_bound_s(0.79e-6, 8192, 128), 0.79e-6 * 64);
  // eq. 18/19: the Q-loop covers the burst at long M.
  const double v = kV;
  EXPECT_GT(fa_a2a_issue_backpressure_s(kT0, v, kR, qloop_gap_lower_bound_s(0.79e-6, 512, 128)), 0.0);
  EXPECT_EQ(fa_a2a_issue_backpressure_s(kT0, v, kR, qloop_gap_lower_bound_s(0.79e-6, 1024, 128)), 0.0);
  EXPECT_DOUBLE_EQ(fa_a2a_critical_stall_s(3e-6, 1e-6), 2e-6);
  EXPECT_EQ(fa_a2a_critical_stall_s(0.5e-6, 1e-6), 0.0);
  // eq. 17: E_cc grows in proportion to the number of bursts.
  const double dcc = completion_coupled_stall_s(v, kR, 1e-6, 0.4e-6);
  EXPECT_NEAR(dcc, v / kR + 0.6e-6, 1e-15);
  EXPECT_DOUBLE_EQ(completion_coupled_exposed_s(20, dcc), 2 * completion_coupled_exposed_s(10, dcc));
}

// Properties on random parameters: monotone in G and V, limits at G = 0 and large G.
TEST(Properties, MonotoneAndLimits) {
  std::mt19937 rng(12345);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int i = 0; i < 2000; ++i) {
    const double r = (100 + 900 * u(rng)) * 1e9, t0 = (0.1 + 5 * u(rng)) * 1e-6, v = (0.01 + 20 * u(rng)) * kMiB;
    const double g1 = 20e-6 * u(rng), g2 = g1 + 10e-6 * u(rng);
    EXPECT_GE(issue_time_s(t0, v, r, g1), issue_time_s(t0, v, r, g2));       // non-increasing in G
    EXPECT_LE(period_s(t0, v, r, g1), period_s(t0, v, r, g2));               // non-decreasing in G
    EXPECT_LE(issue_time_s(t0, v, r, g1), issue_time_s(t0, 1.5 * v, r, g1));  // non-decreasing in V
    EXPECT_LE(peak_outstanding_bytes(t0, v, r), peak_outstanding_bytes(t0, 1.5 * v, r));
    EXPECT_DOUBLE_EQ(issue_time_s(t0, v, r, 0.0), std::max(t0, v / r));      // G = 0
    EXPECT_DOUBLE_EQ(issue_time_s(t0, v, r, 1.0), t0);                       // large G
    EXPECT_DOUBLE_EQ(period_s(t0, v, r, 1.0), t0 + 1.0);
    EXPECT_GE(completion_coupled_period_s(v, r, g1), period_s(t0, v, r, g1) - t0);
    EXPECT_GE(issue_overhead_s(t0, v, r, g1), 0.0);
  }
}

TEST(Equations, RampedKnee) {
  const double r = 330e9, q = 2e6, t0 = 0.3e-6;
  // τ = 0 is eq. 7.
  for (double v : {1e6, 2.5e6, 5e6, 2e7})
    EXPECT_DOUBLE_EQ(isolated_issue_time_ramped_s(t0, v, r, q, 0.0), isolated_issue_time_s(t0, v, r, q));
  // Far past the knee: eq. 7's line moved up by τ; the drained volume at T is exactly V − Q.
  const double tau = 1.8e-6, v = 3e7;
  const double t = isolated_issue_time_ramped_s(t0, v, r, q, tau);
  EXPECT_NEAR(t, (v - q) / r + tau, 1e-9);
  EXPECT_NEAR(ramped_drained_bytes(t, r, tau), v - q, 1e-6 * v);
  // Near the knee it is steeper than 1/R and above eq. 7; below the knee the floor.
  const double a = isolated_issue_time_ramped_s(t0, 2.2e6, r, q, tau), b = isolated_issue_time_ramped_s(t0, 2.4e6, r, q, tau);
  EXPECT_GT((b - a) / 0.2e6, 1.0 / r);
  EXPECT_GT(a, isolated_issue_time_s(t0, 2.2e6, r, q));
  EXPECT_DOUBLE_EQ(isolated_issue_time_ramped_s(t0, 1.5e6, r, q, tau), t0);
  EXPECT_DOUBLE_EQ(effective_gap_s(2e-6, 0.18e-6), 2.18e-6);
}
