// The xstage binary as a user runs it: outputs, exit codes, one-line errors, files never clobbered.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sys/wait.h>

#include "cli_runner.hpp"
#include "xstage/model/burst_gap.hpp"
#include "xstage/model/records.hpp"

namespace {

using xstage::test::CliRun;
using xstage::test::expect_one_line_error;
using xstage::test::run_cli;

std::string paper_platform() { return std::string(XSTAGE_SOURCE_DIR) + "/platforms/paper_8gpu_148sm.json"; }


}  // namespace

TEST(Cli, ModelJsonHasEveryKey) {
  const CliRun r = run_cli("model --platform " + paper_platform() + " --producers 148 --bytes-per-producer 32768 --gap-us 0 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"volume_bytes", "t_iss0_us", "drain_rate_gbps", "capacity_bytes", "t_iss_us", "overhead_us",
                          "period_us", "recovery_gap_us", "q_peak0_bytes", "isolated_t_iss_us", "rate_bound_ok",
                          "capacity_bound_ok", "action"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_NEAR(j["recovery_gap_us"].get<double>(), 6.0, 0.01);
  EXPECT_NEAR(j["q_peak0_bytes"].get<double>() / 1048576.0, 4.1, 0.01);
  EXPECT_EQ(j["action"], "reshape");
  const CliRun g = run_cli("model --platform " + paper_platform() + " --producers 148 --bytes-per-producer 32768 --gap-us 6.1 --json");
  EXPECT_EQ(nlohmann::json::parse(g.out)["action"], "keep");
}

TEST(Cli, PlanReproducesThePaper) {
  const CliRun r = run_cli("plan attn --platform " + paper_platform() +
                       " --producers 148 --block-m 128 --head-dim 128 --block-n 128 --sigma-us 0.79 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j["recovery_gap_us"].get<double>(), 6.0, 0.01);
  EXPECT_EQ(j["m_ub_tokens"], 1024);
  EXPECT_NEAR(j["burst"]["q_peak0_bytes"].get<double>() / 1048576.0, 4.1, 0.01);
  EXPECT_NEAR(j["burst"]["capacity_bytes"].get<double>() / 1048576.0, 4.25, 0.005);
  // E_cc grows with M (eq. 17) while the decoupled stall is zero past M_ub*.
  double prev = 0;
  for (const auto& p : j["points"]) {
    EXPECT_GT(p["completion_coupled_exposed_us"].get<double>(), prev);
    prev = p["completion_coupled_exposed_us"].get<double>();
    EXPECT_EQ(p["issue_backpressure_us"].get<double>(), 0.0);
  }
  // The default plan: every built-in workload, as a table and as JSON.
  const CliRun t = run_cli("plan --platform " + paper_platform());
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("hunyuanvideo-720p"), std::string::npos);
  EXPECT_NE(t.out.find("deepseek-v3"), std::string::npos);
  const CliRun tj = run_cli("plan --json");
  ASSERT_EQ(tj.code, 0) << tj.err;
  EXPECT_GE(nlohmann::json::parse(tj.out)["attention"].size(), 4u);
}

TEST(Cli, PlanMoe) {
  const CliRun r = run_cli("plan moe --platform " + paper_platform() +
                       " --tile-bytes 32768 --producers 148 --t-l1-us 9.77 --t-l2-us 5.30 --n1 1 --n2 1 --h-inter 2048 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j["wave_issue_overhead_us"].get<double>(), xstage::model::positive_part(6.7638 - 5.30 - 0.76), 0.01);
  EXPECT_EQ(j["interleaved_issue_overhead_us"].get<double>(), 0.0);
  EXPECT_EQ(j["lead_knee_rows"], 5);  // ceil(128·148 / 4096)
  expect_one_line_error(run_cli("plan moe --tile-bytes 32768"), "--t-l1-us is required without a kernel description");
  expect_one_line_error(run_cli("plan moe --shape nope"), "\"nope\" is neither a built-in kernel");
  EXPECT_EQ(run_cli("plan moe --shape deepseek-v3 --json").code, 0);
}

TEST(Cli, PlanMoeSimulatesBothOrders) {
  // Short mainloops (fast Tensor Cores) on the paper's 8 GPUs (7/8 of the Combine remote): the wave
  // order's back-to-back Combine bursts hit the drain rate, issued in the epilogue or piggybacked on the
  // next tiles' k-steps; the interleaved order puts Linear-1 work between them.
  const std::string cmd = "plan moe --platform " + paper_platform() +
                          " --shape deepseek-v4-flash --simulate --routing skewed --sm-tflops 20 --ranks 8 --json";
  for (const char* combine : {"epilogue", "piggyback"}) {
    SCOPED_TRACE(combine);
    const CliRun r = run_cli(cmd + " --combine " + combine);
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out)["simulated"];
    EXPECT_EQ(j["combine"], combine);
    EXPECT_DOUBLE_EQ(j["remote_share"].get<double>(), 7.0 / 8.0);
    EXPECT_GT(j["wave"]["total_stall_us"].get<double>(), 10 * j["interleaved"]["total_stall_us"].get<double>() + 1.0);
    EXPECT_GT(j["predicted_speedup"].get<double>(), 1.0);
    EXPECT_EQ(j["choice"], "interleaved");
  }
  // On one rank every Combine store is local: nothing enters the path, nothing stalls, the orders tie.
  const CliRun one = run_cli("plan moe --platform " + paper_platform() +
                             " --shape deepseek-v4-flash --simulate --sm-tflops 20 --ranks 1 --json");
  ASSERT_EQ(one.code, 0) << one.err;
  const auto j1 = nlohmann::json::parse(one.out)["simulated"];
  EXPECT_EQ(j1["remote_share"].get<double>(), 0.0);
  EXPECT_EQ(j1["wave"]["total_stall_us"].get<double>(), 0.0);
  EXPECT_EQ(j1["interleaved"]["total_stall_us"].get<double>(), 0.0);
  expect_one_line_error(run_cli("plan moe --shape deepseek-v3 --simulate --combine both"),
                        "--combine: must be piggyback, epilogue or epilogue_issuer, got \"both\"");
  expect_one_line_error(run_cli("plan moe --shape deepseek-v3 --simulate --routing zipf"), "routing: must be balanced, skewed or a routing file, got \"zipf\"");
  expect_one_line_error(run_cli("plan moe --shape deepseek-v3 --simulate --ranks 3"), "ranks: 3 ranks do not divide the 256 experts");
}

// The simulated interleaved order runs the fused layer's default lead (model::moe_default_lead_rows):
// dit-moe at 132 producers, max(D_knee = 2, ceil(66 / 44) + 1 + 66·5632 / (44·1408)) = 9; --lead-rows
// overrides it.
TEST(Cli, PlanMoeSimulatesTheDefaultLead) {
  const std::string cmd = "plan moe --shape dit-moe-g2-16e2a --simulate --producers 132 --tokens 1024 --json";
  const CliRun d = run_cli(cmd);
  ASSERT_EQ(d.code, 0) << d.err;
  const auto j = nlohmann::json::parse(d.out);
  EXPECT_EQ(j["lead_knee_rows"], 2);
  EXPECT_EQ(j["simulated"]["lead_rows"], 9);
  const CliRun o = run_cli(cmd + " --lead-rows 3");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(nlohmann::json::parse(o.out)["simulated"]["lead_rows"], 3);
}

TEST(Cli, SimulateJson) {
  const CliRun r = run_cli("simulate --platform " + paper_platform() +
                       " --producers 148 --bytes-per-producer 32768 --gap-us 2 --bursts 40 --per-burst --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j["steady_t_iss_us"].get<double>(), 6.7638 - 2.0, 0.05);
  EXPECT_NEAR(j["steady_period_us"].get<double>(), 6.7638, 0.05);
  EXPECT_EQ(j["bursts"].size(), 40u);
  EXPECT_EQ(j["schema"], "xstage.simulate/1");
  const CliRun summary = run_cli("simulate --platform " + paper_platform() +
                                 " --producers 148 --bytes-per-producer 32768 --gap-us 2 --bursts 40 --json");
  EXPECT_FALSE(nlohmann::json::parse(summary.out).contains("bursts")) << "per-burst records are opt-in";
  const CliRun cc = run_cli("simulate --platform " + paper_platform() +
                        " --producers 148 --bytes-per-producer 32768 --gap-us 2 --bursts 10 --completion-coupled --json");
  EXPECT_NEAR(nlohmann::json::parse(cc.out)["steady_period_us"].get<double>(), 6.7638 + 2.0, 0.05);
}

TEST(Cli, SimulateScheduleFile) {
  const std::string path = testing::TempDir() + "/xstage_schedule_" + std::to_string(::getpid()) + ".json";
  std::ofstream(path) << R"({"schema": "xstage.schedule/1", "producers": [
      {"count": 148, "repeat": 40, "steps": [{"burst_bytes": 32768}, {"compute_us": 2.0}]}]})";
  const CliRun f = run_cli("simulate --platform " + paper_platform() + " --schedule " + path + " --per-burst --json");
  const CliRun p = run_cli("simulate --platform " + paper_platform() +
                           " --producers 148 --bytes-per-producer 32768 --gap-us 2 --bursts 40 --per-burst --json");
  ASSERT_EQ(f.code, 0) << f.err;
  ASSERT_EQ(p.code, 0) << p.err;
  const auto fj = nlohmann::json::parse(f.out), pj = nlohmann::json::parse(p.out);
  EXPECT_EQ(fj["bursts"].size(), 148u * 40);
  EXPECT_NEAR(fj["makespan_us"].get<double>(), pj["makespan_us"].get<double>(), 1e-6);
  expect_one_line_error(run_cli("simulate --schedule " + path + " --producers 3"), "--schedule excludes --producers");
  expect_one_line_error(run_cli("simulate --gap-us 2"), "--producers and --bytes-per-producer are required without --schedule");
  std::remove(path.c_str());
}

TEST(Cli, FitWritesPlatformAndNeverOverwrites) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(testing::TempDir()) / "xstage_fit_cli";
  fs::remove_all(dir);
  fs::create_directories(dir);
  // Records from the model with known R = 600 GB/s, T_iss0 = 1 µs at (64, 32 KiB).
  std::vector<xstage::model::CalibrationRecord> rs;
  const double r = 600e9, t0 = 1e-6;
  for (double b : {32768.0, 65536.0, 131072.0}) {
    const double v = 64 * b;
    rs.push_back({xstage::model::BurstMode::kPeriodic, xstage::model::StoreTarget::kRemote, 64, b, 0.0,
                  xstage::model::issue_time_s(t0, v, r, 0), xstage::model::period_s(t0, v, r, 0)});
  }
  for (int i = 0; i <= 10; ++i) {
    const double v = 64 * 32768.0, g = 2 * v / r * i / 10;
    rs.push_back({xstage::model::BurstMode::kPeriodic, xstage::model::StoreTarget::kRemote, 64, 32768, g,
                  xstage::model::issue_time_s(t0, v, r, g), xstage::model::period_s(t0, v, r, g)});
  }
  {
    std::ofstream f(dir / "records.csv");
    xstage::model::write_records_csv(f, rs);
  }
  const std::string out = (dir / "platform.json").string();
  const CliRun ok = run_cli("fit --records " + (dir / "records.csv").string() + " --out " + out);
  ASSERT_EQ(ok.code, 0) << ok.err;
  std::ifstream pf(out);
  const auto pj = nlohmann::json::parse(pf);
  EXPECT_NEAR(pj["drain_rate_gbps"].get<double>(), 600.0, 1.0);
  // A second run refuses to replace the file, and leaves it as it was.
  const std::string before = pj.dump();
  expect_one_line_error(run_cli("fit --records " + (dir / "records.csv").string() + " --out " + out), "already exists");
  std::ifstream pf2(out);
  EXPECT_EQ(nlohmann::json::parse(pf2).dump(), before);
  EXPECT_EQ(run_cli("fit --force --records " + (dir / "records.csv").string() + " --out " + out).code, 0);
  // Bad records file: error names line and column; no output written.
  {
    std::ofstream f(dir / "bad.csv");
    f << xstage::model::kRecordsHeader << "\nperiodic,remote,64,32768,0,-1,2\n";
  }
  const std::string out2 = (dir / "p2.json").string();
  expect_one_line_error(run_cli("fit --records " + (dir / "bad.csv").string() + " --out " + out2),
                        "bad.csv:2: column t_iss_us: must be > 0");
  EXPECT_FALSE(fs::exists(out2));
}

TEST(Cli, BadArgumentsGiveOneLineErrors) {
  expect_one_line_error(run_cli("model --producers -3 --bytes-per-producer 1"), "--producers: must be > 0, got -3");
  expect_one_line_error(run_cli("model --producers 3 --bytes-per-producer abc"), "--bytes-per-producer: must be a finite number > 0, got \"abc\"");
  expect_one_line_error(run_cli("model --producers 3"), "--bytes-per-producer is required");
  expect_one_line_error(run_cli("model --producers 3 --bytes-per-producer 1 --gap-us -1"), "--gap-us: must be in [0, 1e+06], got -1");
  expect_one_line_error(run_cli("model --platform /nonexistent.json --producers 3 --bytes-per-producer 1"), "/nonexistent.json");
  expect_one_line_error(run_cli("simulate --producers 3 --bytes-per-producer 1 --bursts 1"), "--bursts");
  expect_one_line_error(run_cli("plan attn --sigma-us 0"), "--sigma-us: must be > 0, got 0");
  expect_one_line_error(run_cli("fit --records /nonexistent.csv --out x.json"), "/nonexistent.csv");
  expect_one_line_error(run_cli("nosuchcommand"), "nosuchcommand");
  const std::string bad = testing::TempDir() + "/bad_platform_cli.json";
  {
    std::ofstream(bad) << R"({"schema": "xstage.platform/1", "name": "b", "drain_rate_gbps": -1, "issue_floor": [], "capacity": []})";
  }
  expect_one_line_error(run_cli("model --platform " + bad + " --producers 3 --bytes-per-producer 1"),
                        "drain_rate_gbps: must be >= 0.001 and <= 1e+06 GB/s, got -1");
}
