// The GPU subcommands on a machine without a usable GPU: every argument and file check still runs
// first (bad input: its own message), then one line naming the subcommand, the devices asked for and
// what the driver said; exit code 2; nothing created. Skips where a GPU is present or where the
// subcommand is not built (CPU-only builds).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli_runner.hpp"

namespace {

namespace fs = std::filesystem;
using xstage::test::CliRun;
using xstage::test::expect_one_line_error;
using xstage::test::run_cli;

// The NVIDIA driver lists each GPU it drives here; no entry: no usable GPU on this machine.
bool gpu_present() {
  std::error_code ec;
  if (fs::exists("/dev/nvidia0", ec)) return true;
  const fs::path gpus("/proc/driver/nvidia/gpus");
  return fs::is_directory(gpus, ec) && !fs::is_empty(gpus, ec);
}

#define SKIP_UNLESS_NO_GPU_AND_BUILT(name)                                                  \
  do {                                                                                      \
    if (gpu_present()) GTEST_SKIP() << "a GPU is present: the GPU tests cover this machine"; \
    if (!xstage::test::has_subcommand(name)) GTEST_SKIP() << "built without " << name;      \
  } while (0)

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::path(testing::TempDir()) / (name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A valid command on a machine without a GPU: one line "COMMAND: no usable CUDA device(s) LIST
// (cudaGetDeviceCount: ...)", exit 2, no source location.
void expect_no_device(const CliRun& r, const std::string& command, const std::string& devices) {
  EXPECT_EQ(r.code, 2) << r.err;
  expect_one_line_error(r, "xstage: error: " + command + ": no usable CUDA device", devices, "(cudaGetDeviceCount: ");
  EXPECT_EQ(r.err.find(".cu:"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(".cpp:"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(CliNoGpu, AttnBench) {
  SKIP_UNLESS_NO_GPU_AND_BUILT("attn");
  const fs::path dir = fresh_dir("xstage_nogpu_attn");
  const std::string out = (dir / "r.json").string();
  expect_no_device(run_cli("attn bench --seq 1024 --heads 2 --out " + out), "attn bench", "device 0");
  expect_no_device(run_cli("attn bench --seq 1024 --heads 2 --device 3"), "attn bench", "device 3");
  EXPECT_TRUE(fs::is_empty(dir));
  expect_one_line_error(run_cli("attn bench --seq 1024 --heads 2 --head-dim 96"), "--head-dim", "96");
  std::ofstream(dir / "old.json") << "{}";
  expect_one_line_error(run_cli("attn bench --seq 1024 --heads 2 --out " + (dir / "old.json").string()),
                        "already exists (pass --force");
}

TEST(CliNoGpu, AttnUlysses) {
  SKIP_UNLESS_NO_GPU_AND_BUILT("attn");
  if (run_cli("attn ulysses --help").code != 0) GTEST_SKIP() << "built without attn ulysses";
  const fs::path dir = fresh_dir("xstage_nogpu_ulysses");
  expect_no_device(run_cli("attn ulysses --seq 4096 --heads 4 --out " + (dir / "u.json").string()), "attn ulysses",
                   "devices 0,1");
  EXPECT_TRUE(fs::is_empty(dir));
  expect_one_line_error(run_cli("attn ulysses --seq 4096 --heads 4 --platform /nonexistent.json"), "/nonexistent.json");
  std::ofstream(dir / "old.json") << "{}";
  expect_one_line_error(run_cli("attn ulysses --seq 4096 --heads 4 --out " + (dir / "old.json").string()),
                        "already exists");
}

TEST(CliNoGpu, MoeBench) {
  SKIP_UNLESS_NO_GPU_AND_BUILT("moe");
  const fs::path dir = fresh_dir("xstage_nogpu_moe");
  expect_no_device(run_cli("moe bench --shape deepseek-v3 --tokens 256 --out " + (dir / "m.json").string()), "moe bench",
                   "devices 0,1");
  expect_no_device(run_cli("moe bench --shape deepseek-v3 --tokens 256 --impl fused --schedule auto"), "moe bench",
                   "devices 0,1");
  EXPECT_TRUE(fs::is_empty(dir));
  expect_one_line_error(run_cli("moe bench --shape deepseek-v3 --tokens 256 --platform /nonexistent.json"),
                        "/nonexistent.json");
  expect_one_line_error(run_cli("moe bench --shape deepseek-v3 --tokens 256 --zipf-s nan"), "--zipf-s", "nan");
  expect_one_line_error(run_cli("moe bench --shape deepseek-v3 --tokens 256 --seed -2"), "--seed", "-2");
  expect_one_line_error(run_cli("moe bench --shape deepseek-v3 --tokens 256 --timeout-s 0"), "--timeout-s", "got 0");
  expect_one_line_error(run_cli("moe bench --shape deepseek-v3 --tokens 010 --lead-rows -1"), "--lead-rows", "-1");
  std::ofstream(dir / "old.json") << "{}";
  expect_one_line_error(run_cli("moe bench --shape deepseek-v3 --tokens 256 --out " + (dir / "old.json").string()),
                        "already exists");
}

TEST(CliNoGpu, Probe) {
  SKIP_UNLESS_NO_GPU_AND_BUILT("probe");
  expect_no_device(run_cli("probe"), "probe", "devices 0,1");
  expect_no_device(run_cli("probe --gpus 0 --target local"), "probe", "device 0");
  expect_one_line_error(run_cli("probe --store-bytes 3"), "--store-bytes: must be 4, 8 or 16, got 3");
  expect_one_line_error(run_cli("probe --bursts 0"), "--bursts", "got 0");
  expect_one_line_error(run_cli("probe --gap-us nan"), "--gap-us", "nan");
  expect_one_line_error(run_cli("probe --bytes-kib 1e30"), "--bytes-kib");
  expect_one_line_error(run_cli("probe --bytes-per-producer 20"), "--bytes-per-producer", "multiple of 16");
  expect_one_line_error(run_cli("probe --bytes-kib 32 --bytes-per-producer 32768"), "excludes");
  expect_no_device(run_cli("probe --bytes-kib 32"), "probe", "devices 0,1");  // the deprecated spelling still parses
  expect_one_line_error(run_cli("probe --launch other"), "--launch");
}

TEST(CliNoGpu, Calibrate) {
  SKIP_UNLESS_NO_GPU_AND_BUILT("calibrate");
  const fs::path dir = fresh_dir("xstage_nogpu_calibrate");
  const fs::path out = dir / "c";
  expect_no_device(run_cli("calibrate --quick --out " + out.string()), "calibrate", "devices 0,1");
  EXPECT_FALSE(fs::exists(out)) << "no folder is created when there is no GPU";
  expect_one_line_error(run_cli("calibrate --out " + out.string() + " --time-budget nan"),
                        "--time-budget: must be in [0, 86400], got nan");
  expect_one_line_error(run_cli("calibrate --out " + out.string() + " --store-bytes 3"), "--store-bytes");
  expect_one_line_error(run_cli("calibrate --out " + (dir / "no" / "c").string()), "does not exist");
  EXPECT_TRUE(fs::is_empty(dir));
}

}  // namespace
