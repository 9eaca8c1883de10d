// The CLI's input rules as a user meets them: decimal numbers, finite values with their range, work and
// 64-bit limits refused before anything is allocated, output files never clobbered or left half-written,
// and the conventions every JSON output and --help follow.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_fixtures.hpp"
#include "cli_runner.hpp"

namespace {

namespace fs = std::filesystem;
using xstage::test::CliRun;
using xstage::test::expect_one_line_error;
using xstage::test::run_cli;

nlohmann::json json_of(const CliRun& r) {
  EXPECT_EQ(r.code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::path(testing::TempDir()) / (name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Files in `dir` whose name contains ".tmp.": what an interrupted atomic write would leave behind.
int temporaries_in(const fs::path& dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().filename().string().find(".tmp.") != std::string::npos;
  return n;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

TEST(CliInputs, NumbersAreDecimal) {
  EXPECT_EQ(json_of(run_cli("simulate --producers 010 --bytes-per-producer 4096 --bursts 2 --json"))["producers"], 10);
  EXPECT_EQ(json_of(run_cli("plan attn --seq 0100 --json"))["points"][0]["seq_len"], 100);
  EXPECT_EQ(json_of(run_cli("simulate --producers 08 --bytes-per-producer 4096 --bursts 2 --json"))["producers"], 8);
  expect_one_line_error(run_cli("model --producers 0x10 --bytes-per-producer 1"),
                        "--producers: must be a decimal integer, got \"0x10\"");
  expect_one_line_error(run_cli("model --producers 16 --bytes-per-producer 0x10"), "--bytes-per-producer");
}

TEST(CliInputs, NonFiniteAndOutOfRangeValuesNameTheRange) {
  const CliRun nan = run_cli("model --producers 3 --bytes-per-producer 1 --gap-us nan");
  expect_one_line_error(nan, "--gap-us: must be in [0, 1e+06], got nan");
  EXPECT_EQ(nan.code, 2);
  expect_one_line_error(run_cli("simulate --producers 3 --bytes-per-producer 1 --gap-us 2e6"),
                        "--gap-us: must be in [0, 1e+06], got 2e6");
  expect_one_line_error(run_cli("model --producers 3 --bytes-per-producer inf"), "--bytes-per-producer", "inf");
  expect_one_line_error(run_cli("plan attn --sigma-us nan"), "--sigma-us", "nan");
  expect_one_line_error(run_cli("plan moe --shape deepseek-v3 --sm-tflops nan"), "--sm-tflops: must be in [0.01, 1000], got nan");
}

TEST(CliInputs, WorkLimitsAreCheckedBeforeAllocation) {
  const auto t0 = std::chrono::steady_clock::now();
  const CliRun sim = run_cli("simulate --producers 100000 --bursts 100000 --bytes-per-producer 32768");
  EXPECT_EQ(sim.code, 2);
  expect_one_line_error(sim, "--producers 100000 x --bursts 100000", "exceeds the limit of 16777216 producer-bursts",
                        "GiB");
  const CliRun moe = run_cli("plan moe --simulate --shape deepseek-v3 --tokens 1000000");
  EXPECT_EQ(moe.code, 2);
  expect_one_line_error(moe, "tokens 1000000", "exceeds the limit of 8388608 routed token slots");
  // Refused at once, not after growing towards the limit.
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  EXPECT_EQ(run_cli("simulate --producers 1000 --bursts 100 --bytes-per-producer 32768").code, 0);
}

TEST(CliInputs, IntegerOverflowIsAnInputError) {
  // Each factor within its cap (--seq 2^26, --block-m 1, --heads-per-gpu 65536), the product beyond 2^63.
  const CliRun r = run_cli("plan attn --seq 67108864 --block-m 1 --heads-per-gpu 65536 --batch 2147483647");
  EXPECT_EQ(r.code, 2);
  expect_one_line_error(r, "--heads-per-gpu 65536", "--batch 2147483647", "overflows 64-bit integers");
  EXPECT_EQ(r.out.find("-"), std::string::npos) << "no result printed: " << r.out;
  expect_one_line_error(run_cli("plan attn --batch 2147483648"), "--batch");
  EXPECT_EQ(run_cli("plan attn --batch 2147483648").code, 2);
}

TEST(CliInputs, FitOutputIsCheckedAndNeverLeftHalfWritten) {
  const fs::path dir = fresh_dir("xstage_cli_fit_out");
  const fs::path records = dir / "r.csv";
  xstage::test::write_fit_records(records);
  const std::string rec = " --records " + records.string();
  const std::string before = slurp(records);

  expect_one_line_error(run_cli("fit" + rec + " --out \"\""), "--out: empty path");
  fs::create_directories(dir / "sub");
  expect_one_line_error(run_cli("fit" + rec + " --out " + (dir / "sub").string() + " --force"), "is a folder");
  expect_one_line_error(run_cli("fit" + rec + " --out " + records.string() + " --force"), "is also an input");
  fs::create_symlink(records, dir / "link.csv");
  expect_one_line_error(run_cli("fit" + rec + " --out " + (dir / "link.csv").string() + " --force"), "is also an input");
  expect_one_line_error(run_cli("fit" + rec + " --out " + (dir / "p.json") .string() + " --name \"\""),
                        "--name: must not be empty");
  expect_one_line_error(run_cli("fit" + rec + " --out " + (dir / "nofolder" / "p.json").string()), "does not exist");
  EXPECT_EQ(slurp(records), before);
  EXPECT_FALSE(fs::exists(dir / "p.json"));
  EXPECT_EQ(temporaries_in(dir), 0);
  EXPECT_EQ(temporaries_in(dir / "sub"), 0);
  EXPECT_EQ(temporaries_in(fs::current_path()), 0);

  // A good fit: the file is a platform named as asked, and warnings go to stderr.
  const std::string out = (dir / "p.json").string();
  const CliRun ok = run_cli("fit" + rec + " --out " + out + " --name mine");
  ASSERT_EQ(ok.code, 0) << ok.err;
  EXPECT_EQ(ok.out.find("warning"), std::string::npos) << "warnings belong on stderr: " << ok.out;
  const nlohmann::json pj = nlohmann::json::parse(slurp(out));
  EXPECT_EQ(pj["schema"], "xstage.platform/1");
  EXPECT_EQ(pj["name"], "mine");
  const std::string written = slurp(out);
  expect_one_line_error(run_cli("fit" + rec + " --out " + out), "already exists (pass --force");
  EXPECT_EQ(slurp(out), written);
  EXPECT_EQ(run_cli("fit" + rec + " --out " + out + " --force --json").code, 0);
  EXPECT_EQ(temporaries_in(dir), 0);
}

TEST(CliInputs, EveryJsonNamesSchemaVersionAndPlatformSource) {
  const std::string file = std::string(XSTAGE_SOURCE_DIR) + "/platforms/paper_8gpu_148sm.json";
  for (const std::string& cmd : {"plan --json", "plan attn --json", "plan moe --shape deepseek-v3 --json",
                                 "model --producers 8 --bytes-per-producer 4096 --json",
                                 "simulate --producers 8 --bytes-per-producer 4096 --json"}) {
    const nlohmann::json j = json_of(run_cli(cmd));
    const std::string word = cmd.substr(0, cmd.find(' '));
    EXPECT_EQ(j["schema"].get<std::string>().rfind("xstage." + word, 0), 0u) << cmd;
    EXPECT_TRUE(j["version"].is_string()) << cmd;
    EXPECT_EQ(j["platform"]["source"], "embedded") << cmd;
    EXPECT_TRUE(j["platform"]["name"].is_string()) << cmd;
    const nlohmann::json f = json_of(run_cli(cmd + " --platform " + file));
    EXPECT_EQ(fs::path(f["platform"]["source"].get<std::string>()), fs::canonical(file)) << cmd;
  }
  EXPECT_EQ(json_of(run_cli("plan --json"))["schema"], "xstage.plan/1");
  // Human output says which platform it used.
  EXPECT_NE(run_cli("plan attn").out.find("(embedded)"), std::string::npos);
  EXPECT_NE(run_cli("plan moe --shape deepseek-v3 --platform " + file).out.find(fs::canonical(file).string()),
            std::string::npos);
}

TEST(CliInputs, VersionAndHelpDefaults) {
  const CliRun v = run_cli("--version");
  EXPECT_EQ(v.code, 0) << v.err;
  for (const char* key : {"xstage ", "git revision: ", "build type: ", "CUDA: ", "NCCL: ", "CUTLASS: "})
    EXPECT_NE(v.out.find(key), std::string::npos) << key << " in " << v.out;
  const CliRun h = run_cli("plan attn --help");
  EXPECT_NE(h.out.find("--block-m INT:[1, 4096]=128"), std::string::npos) << h.out;
  EXPECT_NE(run_cli("simulate --help").out.find("--bursts INT:[2, 100000]=50"), std::string::npos);
  // One spelling and default for the MoE prediction options (the old spelling still parses).
  const CliRun m = run_cli("plan moe --help");
  EXPECT_NE(m.out.find("--zipf-s,--zipf"), std::string::npos) << m.out;
  // The mainloop estimate of a built-in shape: the platform's per-SM GEMM rate unless --sm-tflops is given.
  EXPECT_NE(m.out.find("default: the platform's rate at --precision"), std::string::npos) << m.out;
  EXPECT_EQ(run_cli("plan moe --shape deepseek-v3 --simulate --routing skewed --zipf 1.1 --lead-rows 0 --json").code, 0);
}

TEST(CliInputs, SimulatePrintsASummaryUnlessAskedPerBurst) {
  const CliRun s = run_cli("simulate --producers 8 --bytes-per-producer 4096 --bursts 1000");
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_LT(std::count(s.out.begin(), s.out.end(), '\n'), 10) << s.out;
  const CliRun p = run_cli("simulate --producers 8 --bytes-per-producer 4096 --bursts 1000 --per-burst");
  EXPECT_GT(std::count(p.out.begin(), p.out.end(), '\n'), 1000);
}

}  // namespace
