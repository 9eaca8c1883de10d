// xstage's own two-GPU results as a test set (planner::own_report, `xstage paper --own`): the loaders' refusals,
// one MoE configuration and one Ulysses point recomputed by hand against the report's rows, and the CLI.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_runner.hpp"
#include "xstage/model/error.hpp"
#include "xstage/model/input_file.hpp"
#include "xstage/model/platform.hpp"
#include "xstage/planner/paper_report.hpp"
#include "xstage/sim/moe_order_simulation.hpp"

using namespace xstage;
using nlohmann::json;

namespace {

std::string src(const std::string& rel) { return std::string(XSTAGE_SOURCE_DIR) + "/" + rel; }
const std::string kBf16 = "results/h200-x2/moe/moe_matrix.json";
const std::string kFp8 = "results/h200-x2/moe/moe_matrix_fp8.json";
const std::string kUly = "results/h200-x2/ulysses/ulysses.json";

json load(const std::string& rel) { return load_json_input(src(rel), "test input"); }

// A platform written out here (not read from platforms/, which is refitted): R, T_iss0 at the fused grid's
// 132 x 32 KiB and at 132 x 16 KiB (the remote half of a Combine tile), Q, and a GEMM rate per precision.
model::Platform test_platform() {
  return model::platform_from_json(json::parse(R"({
    "schema": "xstage.platform/1", "name": "own-test",
    "drain_rate_gbps": 400.0,
    "issue_floor": [{"producers": 132, "bytes_per_producer": 32768, "t_iss0_us": 0.6},
                    {"producers": 132, "bytes_per_producer": 16384, "t_iss0_us": 0.35}],
    "capacity": [{"producers": 132, "bytes": 2000000}],
    "gemm_rate_per_sm": [{"precision": "bf16", "tflops_per_sm": 5.0, "source": "measured"}, {"precision": "fp8", "tflops_per_sm": 6.0, "source": "measured"}]})"),
                                   "test");
}

// Expects an InputError whose message holds every one of `parts`.
template <class F>
void expect_refused(F&& f, std::initializer_list<const char*> parts) {
  try {
    f();
    ADD_FAILURE() << "not refused";
  } catch (const InputError& e) {
    for (const char* p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(OwnReport, MatrixLoaderKeepsTheSummaryConfigurations) {
  const auto bf16 = planner::own_moe_configs_from_json(load(kBf16), kBf16);
  const auto fp8 = planner::own_moe_configs_from_json(load(kFp8), kFp8);
  EXPECT_EQ(bf16.size(), 24u);  // 28 planned, 4 left out of the matrix's summary
  EXPECT_EQ(fp8.size(), 14u);
  for (const auto& c : fp8) EXPECT_EQ(c.precision, "fp8");
  const auto pts = planner::own_ulysses_points_from_json(load(kUly), kUly);
  EXPECT_EQ(pts.size(), 7u);  // the own-last points; the two natural-order repeats are left out
}

TEST(OwnReport, LoadersRefuseBadInputNamingTheField) {
  const json m = load(kBf16);
  auto moe = [](json j) { return [j] { (void)planner::own_moe_configs_from_json(j, "m.json"); }; };
  json j = m;
  j["schema"] = "xstage.other";
  expect_refused(moe(j), {"m.json", "schema"});
  j = m;
  j["precision"] = "fp4";
  expect_refused(moe(j), {"precision", "fp4"});
  j = m;
  j["configurations"][0]["wave_ms"] = -1.0;
  expect_refused(moe(j), {"configurations[0].wave_ms"});
  j = m;
  j["configurations"][0]["primary_run"] = 999;
  expect_refused(moe(j), {"configurations[0].primary_run", "999"});
  j = m;
  j["configurations"][0]["routing"] = "zipf";
  expect_refused(moe(j), {"configurations[0].routing"});
  j = m;
  j["runs"][0]["result"]["precision"] = "fp8";
  expect_refused(moe(j), {"runs[index 1].result.precision"});
  j = m;
  j["runs"][0]["result"]["impls"].erase(1);
  expect_refused(moe(j), {"runs[index 1].result.impls", "fused_interleaved"});
  j = m;
  for (auto& c : j["configurations"]) c["in_summary"] = false;
  expect_refused(moe(j), {"configurations", "none is in the summary"});

  const json u = load(kUly);
  auto uly = [](json j) { return [j] { (void)planner::own_ulysses_points_from_json(j, "u.json"); }; };
  j = u;
  j["schema"] = "xstage.ulysses/1";
  expect_refused(uly(j), {"u.json", "schema"});
  j = u;
  j["points"][0]["variants"].erase("fused-tma");
  expect_refused(uly(j), {"points[0].variants", "fused-tma"});
  j = u;
  j["points"][0]["variants"]["serial-tma"]["sender_median_us"] = 1.0;
  expect_refused(uly(j), {"points[0].variants.serial-tma", "fa-only-tma"});
  j = u;
  j["points"][1]["seq_total"] = 5;
  expect_refused(uly(j), {"points[1].seq_total"});
  j = u;
  for (auto& p : j["points"]) p["tile_order"] = "natural";
  expect_refused(uly(j), {"own-last"});
}

TEST(OwnReport, RegeneratedRoutingMustReproduceTheRun) {
  auto configs = planner::own_moe_configs_from_json(load(kBf16), kBf16);
  // Every configuration's routing regenerates (balanced and skewed) ...
  for (const auto& c : configs) EXPECT_NO_THROW((void)planner::own_moe_expert_load(c)) << c.shape << " " << c.routing;
  // ... and a seed or skew that is not the run's is refused, naming the configuration.
  for (auto& c : configs) {
    if (c.routing != "skewed") continue;
    planner::OwnMoeConfig bad = c;
    bad.seed += 1;
    expect_refused([&] { (void)planner::own_moe_expert_load(bad); }, {c.shape.c_str(), "regenerated"});
    bad = c;
    bad.zipf_s *= 1.5;
    expect_refused([&] { (void)planner::own_moe_expert_load(bad); }, {c.shape.c_str()});
    break;
  }
}

// deepseek-v4-flash, 1,024 tokens per rank, balanced, run 15 of the bf16 matrix: the row is the simulator's
// prediction for the run's launch, built here from the numbers the run recorded.
TEST(OwnReport, MoeRowIsTheSimulatorsPredictionForTheRunsLaunch) {
  const auto configs = planner::own_moe_configs_from_json(load(kBf16), kBf16);
  const planner::OwnMoeConfig* c = nullptr;
  for (const auto& x : configs)
    if (x.shape == "deepseek-v4-flash" && x.tokens_per_rank == 1024 && x.routing == "balanced") c = &x;
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->run, 15);
  const model::Platform p = test_platform();
  const planner::OwnMoeRow row = planner::own_moe_row(p, *c);

  sim::MoeScheduleQuery q;
  q.hidden = 4096;
  q.h_inter = 2048;
  q.experts = 256;
  q.top_k = 6;
  q.ranks = 2;
  q.grid = 132;
  q.lead_rows = 7;
  q.experts_per_wave = 32;
  q.precision = "bf16";
  q.combine = sim::MoeCombineModel::kPiggyback;
  // Balanced: 1,024 tokens x 6 slots over 256 experts is 24 per expert on each of the 2 ranks.
  const std::vector<long long> load(256, 48);
  const sim::MoeSchedulePrediction sp = sim::predict_moe_schedule(p, q, load);
  EXPECT_DOUBLE_EQ(row.predicted, sp.wave_makespan_s / sp.interleaved_makespan_s);
  EXPECT_DOUBLE_EQ(row.wave_makespan_us, sp.wave_makespan_s * 1e6);
  EXPECT_DOUBLE_EQ(row.sm_tflops, 5.0);
  EXPECT_DOUBLE_EQ(row.measured, 1.9375199675559998 / 1.9436799883842468);  // the run's medians (ms)
  EXPECT_DOUBLE_EQ(row.error(), row.predicted - row.measured);
  // The prediction moves with the platform: it is computed, not read from the run's recorded prediction.
  json pj = json::parse(R"({"schema": "xstage.platform/1", "name": "slow-gemm", "drain_rate_gbps": 400.0,
    "issue_floor": [{"producers": 132, "bytes_per_producer": 16384, "t_iss0_us": 0.35}],
    "capacity": [{"producers": 132, "bytes": 2000000}],
    "gemm_rate_per_sm": [{"precision": "bf16", "tflops_per_sm": 0.5, "source": "measured"}]})");
  const planner::OwnMoeRow slow = planner::own_moe_row(model::platform_from_json(pj, "test"), *c);
  EXPECT_NE(slow.predicted, row.predicted);
}

// 8192 x 4, TMA pair: N_t = ceil(64·4/132) = 2 output waves; the Q-loop gap (σ·64 ≈ 100 us) is far above G*, so
// eq. 19's stall is 0 and the predicted residual is 2·T_iss0(132, 32 KiB); H = 1 − residual / T_A2A.
TEST(OwnReport, UlyssesRowIsEq18And19OnTheMeasuredFaOnlyTime) {
  const auto pts = planner::own_ulysses_points_from_json(load(kUly), kUly);
  ASSERT_EQ(pts[0].label, "8192 x 4");
  const model::Platform p = test_platform();
  const planner::OwnUlyssesRow r = planner::own_ulysses_row(p, pts[0], true);
  const double a2a_us = 23.599999956786633, fa_tma = 199.40800219774246;  // ulysses.json, sender medians
  EXPECT_EQ(r.fused.waves, 2);
  EXPECT_NEAR(r.fused.fa_s * 1e6, fa_tma, 1e-9);
  EXPECT_NEAR((r.fused.fused_s - r.fused.fa_s) * 1e6, 2 * 0.6, 1e-9);
  EXPECT_NEAR(r.predicted_hiding_ratio, 1.0 - 2 * 0.6 / a2a_us, 1e-9);
  const double fused = 205.29600232839584, serial = 219.15199607610703;
  EXPECT_NEAR(r.measured_hiding_ratio, 1.0 - (fused - fa_tma) / (serial - fa_tma), 1e-12);
  // The staged pair: the same model on its own FA-only time.
  const planner::OwnUlyssesRow s = planner::own_ulysses_row(p, pts[0], false);
  EXPECT_NEAR(s.fused.fa_s * 1e6, 209.29600298404694, 1e-9);
  EXPECT_NEAR(s.predicted_hiding_ratio, r.predicted_hiding_ratio, 1e-12);
  EXPECT_NE(s.measured_hiding_ratio, r.measured_hiding_ratio);
}

TEST(OwnReport, SummaryCountsAndMissingMechanisms) {
  // A trimmed folder: two configurations per matrix and the sweep, so the report runs in a moment.
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(testing::TempDir()) / ("xstage_own_" + std::to_string(::getpid()));
  fs::create_directories(dir / "moe");
  fs::create_directories(dir / "ulysses");
  for (const auto& [rel, out] : {std::pair{kBf16, "moe/moe_matrix.json"}, std::pair{kFp8, "moe/moe_matrix_fp8.json"}}) {
    json j = load(rel);
    json keep = json::array();
    for (const auto& c : j["configurations"])
      if (c["in_summary"] == true && c["tokens_per_rank"] == 8192 && c["shape"] == "qwen3-235b-a22b") keep.push_back(c);
    j["configurations"] = keep;
    std::ofstream(dir / out) << j.dump();
  }
  std::ofstream(dir / "ulysses/ulysses.json") << load(kUly).dump();
  const planner::OwnReport rep = planner::own_report(test_platform(), dir.string());
  EXPECT_EQ(rep.moe_bf16.size(), 2u);
  EXPECT_EQ(rep.moe_fp8.size(), 2u);
  EXPECT_EQ(rep.ulysses_tma.size(), 7u);
  EXPECT_EQ(rep.bf16.n, 2);
  double worst = 0;
  for (const auto& r : rep.moe_fp8) worst = std::max(worst, std::fabs(r.error()));
  EXPECT_DOUBLE_EQ(rep.fp8.max_abs_error, worst);
  const json j = planner::to_json(rep);
  EXPECT_EQ(j["moe_fp8"].size(), 2u);
  EXPECT_FALSE(j["assumptions"].empty());
  // The staged pair's hiding ratio is off by far more than its band at M >= 16K: the report names what is missing.
  EXPECT_GT(rep.uly_staged.max_abs_error, 0.5);
  bool named = false;
  for (const auto& m : rep.missing) named |= m.find("staged") != std::string::npos;
  EXPECT_TRUE(named);
  fs::remove_all(dir);
}

TEST(PaperCli, OwnModeRefusesBadInputAndWrites) {
  namespace fs = std::filesystem;
  const std::string plat = "--platform " + src("platforms/h200_x2_measured.json");
  auto r = test::run_cli("paper " + plat + " --own /nonexistent/dir");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--own"), std::string::npos) << r.err;
  r = test::run_cli("paper " + plat + " --own " + src("results/h200-x2") + " --only knee");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--only"), std::string::npos) << r.err;
  r = test::run_cli("paper " + plat + " --own " + src("results/h200-x2") + " --heads-per-gpu 4");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--heads-per-gpu"), std::string::npos) << r.err;
  // A folder without the matrices: refused naming the missing file.
  const fs::path empty = fs::path(testing::TempDir()) / ("xstage_own_empty_" + std::to_string(::getpid()));
  fs::create_directories(empty);
  r = test::run_cli("paper " + plat + " --own " + empty.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("moe_matrix.json"), std::string::npos) << r.err;
  // The committed folder: every configuration, JSON on stdout and files that are not overwritten without --force.
  const std::string out = (empty / "own.json").string(), txt = (empty / "own.txt").string();
  r = test::run_cli("paper " + plat + " --own " + src("results/h200-x2") + " --json --out " + out + " --text-out " + txt);
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["schema"], "xstage.paper_own/1");
  EXPECT_EQ(j["moe_bf16"].size(), 24u);
  EXPECT_EQ(j["moe_fp8"].size(), 14u);
  EXPECT_EQ(j["ulysses_tma"].size(), 7u);
  EXPECT_EQ(j["ulysses_staged"].size(), 7u);
  // The provenance ties the file to the build's revision, the command and its inputs.
  const json& prov = j.at("provenance");
  EXPECT_FALSE(prov.at("git_revision").get<std::string>().empty());
  EXPECT_EQ(prov.at("command").at(0), "xstage");
  EXPECT_EQ(prov.at("command").at(1), "paper");
  EXPECT_EQ(prov.at("command").back(), txt);
  ASSERT_EQ(prov.at("inputs").size(), 4u);
  EXPECT_EQ(prov["inputs"][0]["path"], src("platforms/h200_x2_measured.json"));
  EXPECT_EQ(prov["inputs"][0]["bytes"], fs::file_size(src("platforms/h200_x2_measured.json")));
  EXPECT_EQ(json::parse(std::ifstream(out)).at("provenance"), prov);
  EXPECT_TRUE(fs::exists(out));
  EXPECT_TRUE(fs::exists(txt));
  r = test::run_cli("paper " + plat + " --own " + src("results/h200-x2") + " --out " + out);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--out"), std::string::npos) << r.err;
  r = test::run_cli("paper " + plat + " --own " + src("results/h200-x2") + " --out " + txt + " --text-out " + txt + " --force");
  EXPECT_NE(r.code, 0);
  fs::remove_all(empty);
}
