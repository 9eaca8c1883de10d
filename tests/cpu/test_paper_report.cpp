// The paper as a test set (planner::paper_report, `xstage paper`): rows recomputed independently from the
// paper's printed numbers, the time models' arithmetic, refused inputs, and the CLI's contract.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_runner.hpp"
#include "xstage/model/error.hpp"
#include "xstage/model/kernel_description.hpp"
#include "xstage/model/platform.hpp"
#include "xstage/planner/paper_report.hpp"

using namespace xstage;

namespace {

// The paper's platform as printed in §3 (not read from platforms/: the test recomputes from the paper).
model::Platform paper_platform() {
  return model::platform_from_json(nlohmann::json::parse(R"({
    "schema": "xstage.platform/1", "name": "paper-8gpu-148sm",
    "drain_rate_gbps": 717.0,
    "issue_floor": [{"producers": 148, "bytes_per_producer": 32768, "t_iss0_us": 0.76}],
    "capacity": [{"producers": 148, "bytes": 4456296}]})"),
                                   "test");
}

const planner::PaperRow& find_row(const planner::PaperReport& rep, const std::string& id) {
  for (const auto& r : rep.rows)
    if (r.id == id) return r;
  throw std::runtime_error("no row " + id);
}

planner::PaperOptions only(bool knee, bool table2, bool ecc, bool table3) {
  planner::PaperOptions o;
  o.knee = knee;
  o.table2 = table2;
  o.ecc = ecc;
  o.distribution = false;
  o.table3 = table3;
  return o;
}

std::string src(const std::string& rel) { return std::string(XSTAGE_SOURCE_DIR) + "/" + rel; }

}  // namespace

TEST(PaperReport, KneeRowsRecomputedFromThePrintedNumbers) {
  const auto rep = planner::paper_report(paper_platform(), only(true, false, false, false));
  const double v = 148.0 * 128 * 128 * 2;  // K aligned bf16 128x128 output tiles
  const double r = 717e9, t0 = 0.76e-6;
  const double g_star_us = (v / r - t0) * 1e6;
  EXPECT_NEAR(*find_row(rep, "s4.3.g_star").predicted, g_star_us, 1e-9);
  EXPECT_NEAR(*find_row(rep, "s4.3.g_star").predicted, 6.004, 1e-3);
  EXPECT_NEAR(*find_row(rep, "s4.3.q_peak0").predicted, (v - r * t0) / (1024.0 * 1024.0), 1e-9);
  EXPECT_NEAR(*find_row(rep, "s4.3.m_ub").predicted, 128 * std::ceil(g_star_us / 0.79) / 1000.0, 1e-12);
  EXPECT_NEAR(*find_row(rep, "s3.5.knee_per_producer").predicted, 33.0, 1e-3);
  for (const auto& row : rep.rows) EXPECT_EQ(row.verdict(), "met") << row.id;
}

TEST(PaperReport, EccIsEq17TimesTheOutputWaves) {
  planner::PaperOptions o = only(false, false, true, false);
  const auto rep = planner::paper_report(paper_platform(), o);
  const double v = 148.0 * 128 * 128 * 2;
  const double per_burst_us = (v / 717e9 - 0.5 * 0.79e-6) * 1e6;  // T_lat 0, T_cover sigma/2
  // N_t = ceil(ceil(M/128)*4/148): 2 at 8K, 14 at 64K.
  EXPECT_NEAR(*find_row(rep, "s4.3.e_cc.8k").predicted, 2 * per_burst_us, 1e-9);
  EXPECT_NEAR(*find_row(rep, "s4.3.e_cc.64k").predicted, 14 * per_burst_us, 1e-9);
  // With T_lat = 0 the row is a lower bound and misses the paper's 16 us by more than 10 %: reported, not tuned.
  EXPECT_EQ(find_row(rep, "s4.3.e_cc.8k").verdict(), "missed");
  EXPECT_FALSE(find_row(rep, "s4.3.e_cc.8k").missing.empty());
  EXPECT_FALSE(find_row(rep, "s2.3.cc_ceiling").predicted.has_value());
  // A latency moves every point by N_t * T_lat.
  o.completion_latency_us = 1.0;
  const auto rep2 = planner::paper_report(paper_platform(), o);
  EXPECT_NEAR(*find_row(rep2, "s4.3.e_cc.64k").predicted - *find_row(rep, "s4.3.e_cc.64k").predicted, 14.0, 1e-9);
}

TEST(PaperReport, TimeModels) {
  EXPECT_DOUBLE_EQ(planner::completion_coupled_wave_ceiling(1, 0, 1, 1), 1.5);
  EXPECT_DOUBLE_EQ(planner::completion_coupled_wave_ceiling(2, 1, 1, 3), 7.0 / 5.0);
  EXPECT_THROW(planner::completion_coupled_wave_ceiling(-1, 0, 1, 1), InputError);
  EXPECT_THROW(planner::completion_coupled_wave_ceiling(0, 0, 0, 0), InputError);
  EXPECT_EQ(planner::fa_output_waves(8192, 128, 4, 1, 148), 2);
  EXPECT_EQ(planner::fa_output_waves(65536, 128, 4, 1, 148), 14);
  EXPECT_NEAR(planner::fa_sigma_from_time_s(85.4e-6, 8192, 128, 128, 4, 1, 148), 85.4e-6 / (2 * 64), 1e-18);
  EXPECT_NEAR(planner::serial_a2a_time_s(1e6, 1e11, 2e-6), 12e-6, 1e-18);
  EXPECT_THROW(planner::serial_a2a_time_s(1e6, 0, 0), InputError);
  EXPECT_THROW(planner::serial_a2a_time_s(-1, 1e9, 0), InputError);
  EXPECT_THROW(planner::fa_sigma_from_time_s(0, 8192, 128, 128, 4, 1, 148), InputError);
  // FA4 at 8K: the Q-loop (64 sigma = 42.7 us) covers G* = 6.0 us, so only the issue floor per wave remains.
  planner::FusedAttentionInput in;
  in.fa_time_s = 85.4e-6;
  in.seq_len = 8192;
  const auto f = planner::fused_attention_time(paper_platform(), in);
  EXPECT_EQ(f.waves, 2);
  EXPECT_DOUBLE_EQ(f.drain_s, 0.0);
  EXPECT_NEAR(f.fused_s, 85.4e-6 + 2 * 0.76e-6, 1e-15);
}

TEST(PaperReport, Table3SpeedupFromTheFusedAndSerialModels) {
  const auto rep = planner::paper_report(paper_platform(), only(false, false, false, true));
  const double fa = 85.4, fused = fa + 2 * 0.76;
  const double remote = 8192.0 * 4 * 128 * 2 * 7 / 8;
  const double serial = fa + 26.6 + remote / 183.7e9 * 1e6;
  EXPECT_NEAR(*find_row(rep, "table3.FA4.speedup.8k").predicted, serial / fused, 1e-9);
  EXPECT_NEAR(*find_row(rep, "table3.FA4.hiding.8k").predicted, 1 - (fused - fa) / (serial - fa), 1e-9);
  EXPECT_NEAR(find_row(rep, "table3.FA4.speedup.8k").published, 1.417, 0);
}

TEST(PaperReport, Table2Eq15OnThePublishedSpansIsThePapersPredictionColumn) {
  const auto rep = planner::paper_report(paper_platform(), only(false, true, false, false));
  // Table 2: wave span, L2 mainloop, the paper's eq. 15 prediction.
  const struct {
    const char* model;
    double span, t_l2, pred;
  } rows[] = {{"DiT-MoE", 9.93, 5.30, 4.63}, {"Qwen3.5", 9.17, 4.24, 4.94}, {"Hy3", 9.68, 6.09, 3.60},
              {"MiMo-V2.5", 9.22, 7.77, 1.45}, {"GLM-5.2", 9.53, 7.99, 1.54}, {"DSv4-Flash", 9.48, 8.01, 1.47},
              {"DSv4-Pro", 7.88, 9.54, 0.0}};
  for (const auto& t : rows) {
    const auto& r = find_row(rep, std::string("table2.") + t.model + ".eq15_from_published_span");
    EXPECT_NEAR(*r.predicted, std::max(0.0, t.span - t.t_l2), 1e-9) << t.model;
    EXPECT_NEAR(r.published, t.pred, 0) << t.model;
    EXPECT_EQ(r.verdict(), "met") << t.model;
  }
  // The simulated stall is a prediction that can fail: a wave stall where the paper measures one.
  EXPECT_GT(*find_row(rep, "table2.Qwen3.5.wave_stall").predicted, 1.0);
  EXPECT_EQ(*find_row(rep, "table2.Qwen3.5.int_stall").predicted, 0.0);
}

// DiT-MoE's description takes the released G/2 dims (1408, 5632) in the roles Table 2's mainloops (inputs, not
// the tested spans or stalls) require: Linear-2's reduction is h_inter, and its 5.30 us mainloop over 5632 would be
// 52 TFLOP/s per SM, above the GPU's FP8 peak. With h_inter 1408 the wave order is drain-limited like the other
// five: span K V_t / R = 148 * 43008 B / 717 GB/s and stall T_RS - T_L2, both within Table 2's goals.
TEST(PaperReport, Table2DiTMoeRowsFromTheDimsTable2Requires) {
  const model::KernelSource ks = model::kernel_source("paper-dit-moe");
  const model::MoeKernel k = model::moe_kernel_from_json(ks.json, ks.origin);
  EXPECT_EQ(k.hidden, 5632);
  EXPECT_EQ(k.h_inter, 1408);
  const double l2_ns_per_k = k.t_l2_us * 1e3 / k.h_inter, l1_ns_per_k = k.t_l1_us * 1e3 / k.hidden;
  EXPECT_GT(l2_ns_per_k, 3.5);  // the other six L2 mainloops: 3.1-4.1 ns per K element
  EXPECT_LT(l1_ns_per_k, 3.6);  // the other six L1 mainloops: 1.6-3.5
  const auto rep = planner::paper_report(paper_platform(), only(false, true, false, false));
  const double span = 148.0 * 192 * 128 * 2 * 7 / 8 / 717e9 * 1e6;
  EXPECT_NEAR(*find_row(rep, "table2.DiT-MoE.wave_span").predicted, span, 1e-6);
  EXPECT_NEAR(*find_row(rep, "table2.DiT-MoE.wave_stall").predicted, span - 5.30, 1e-6);
  EXPECT_EQ(find_row(rep, "table2.DiT-MoE.wave_span").verdict(), "met");
  EXPECT_EQ(find_row(rep, "table2.DiT-MoE.wave_stall").verdict(), "met");
  // DSv4-Pro stays missed and says why with its numbers: rho = K V_t / (T_L2 R) < 1, and the drain-rate cliff.
  const auto& pro = find_row(rep, "table2.DSv4-Pro.wave_span");
  EXPECT_EQ(pro.verdict(), "missed");
  char rho[16];
  std::snprintf(rho, sizeof rho, "%.3f", span / 9.54);  // 0.931
  EXPECT_NE(pro.missing.find(std::string("rho = K V_t / (T_L2 R) = ") + rho), std::string::npos) << pro.missing;
  bool cliff = false;
  for (const auto& sv : pro.sensitivity)
    if (sv["input"].get<std::string>().rfind("drain rate", 0) == 0 && sv["predicted"].get<double>() > 9.54) cliff = true;
  EXPECT_TRUE(cliff);
}

TEST(PaperReport, VerdictsAndRefusedOptions) {
  planner::PaperRow r;
  r.published = 4.0;
  r.predicted = 4.9;
  r.goal = planner::GoalKind::kAbsolute;
  r.tolerance = 1.0;
  EXPECT_EQ(r.verdict(), "met");
  r.predicted = 5.1;
  EXPECT_EQ(r.verdict(), "missed");
  r.goal = planner::GoalKind::kNone;
  EXPECT_EQ(r.verdict(), "off > 10 %");
  r.predicted.reset();
  EXPECT_EQ(r.verdict(), "not predicted");
  planner::PaperOptions o;
  o.heads_per_gpu = 0;
  EXPECT_THROW(planner::check_paper_options(o), InputError);
  o = {};
  o.a2a_rate_gbps = -1;
  EXPECT_THROW(planner::check_paper_options(o), InputError);
  o = {};
  o.completion_latency_us = NAN;
  EXPECT_THROW(planner::check_paper_options(o), InputError);
  o = {};
  o.distribution_tokens = {0};
  EXPECT_THROW(planner::check_paper_options(o), InputError);
}

TEST(PaperCli, RefusesBadInputAndWritesJson) {
  const std::string plat = "--platform " + src("platforms/paper_8gpu_148sm.json");
  auto r = test::run_cli("paper " + plat + " --bogus");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--bogus"), std::string::npos) << r.err;
  r = test::run_cli("paper " + plat + " --only knee,nope");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--only"), std::string::npos) << r.err;
  r = test::run_cli("paper " + plat + " --heads-per-gpu 0");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--heads-per-gpu"), std::string::npos) << r.err;
  r = test::run_cli("paper --only knee");
  EXPECT_NE(r.code, 0);  // --platform is required
  r = test::run_cli("paper " + plat + " --only knee,ecc --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["schema"], "xstage.paper/1");
  EXPECT_GE(j["rows"].size(), 10u);
  EXPECT_FALSE(j["assumptions"].empty());
  const std::string out = testing::TempDir() + "/xstage_paper_test.json";
  std::remove(out.c_str());
  r = test::run_cli("paper " + plat + " --only knee --out " + out);
  EXPECT_EQ(r.code, 0) << r.err;
  r = test::run_cli("paper " + plat + " --only knee --out " + out);
  EXPECT_NE(r.code, 0);  // exists, no --force
  r = test::run_cli("paper " + plat + " --only knee --out " + out + " --force");
  EXPECT_EQ(r.code, 0) << r.err;
  std::remove(out.c_str());
}
