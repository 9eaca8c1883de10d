// `xstage moe bench` input validation, run as a user runs it: bad values give one line naming the
// option and the value, exit code 2, before any GPU is touched (so this runs without a GPU).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

namespace {

struct MoeCliRun {
  int code;
  std::string err;
};

MoeCliRun run_moe_cli(const std::string& args) {
  // One stderr file per process: ctest runs tests in parallel.
  const std::string err_path = testing::TempDir() + "/xstage_moe_cli_stderr_" + std::to_string(getpid()) + ".txt";
  const std::string cmd = std::string(XSTAGE_CLI_PATH) + " " + args + " >/dev/null 2>" + err_path;
  const int status = std::system(cmd.c_str());
  std::ifstream e(err_path);
  std::string err((std::istreambuf_iterator<char>(e)), std::istreambuf_iterator<char>());
  std::remove(err_path.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, err};
}

// The subcommand exists only in builds with CUDA.
bool have_moe_subcommand() { return run_moe_cli("moe --help").code == 0; }

void expect_input_error(const std::string& args, const std::string& option, const std::string& value) {
  const MoeCliRun r = run_moe_cli(args);
  EXPECT_EQ(r.code, 2) << args << "\nstderr: " << r.err;
  EXPECT_NE(r.err.find(option), std::string::npos) << "stderr: " << r.err;
  EXPECT_NE(r.err.find(value), std::string::npos) << "stderr: " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "stderr: " << r.err;
}

TEST(MoeCli, BadValuesNameTheOptionAndValue) {
  if (!have_moe_subcommand()) GTEST_SKIP() << "xstage built without CUDA: no moe subcommand";
  const std::string ok = "moe bench --gpus 0,1 ";
  expect_input_error(ok + "--shape no-such-model --tokens 64", "--shape", "no-such-model");
  expect_input_error(ok + "--shape deepseek-v3 --tokens -4", "--tokens", "-4");
  expect_input_error(ok + "--shape deepseek-v3 --tokens 0", "--tokens", "0");
  expect_input_error(ok + "--shape deepseek-v3 --tokens 64 --precision fp4", "--precision", "fp4");
  expect_input_error(ok + "--shape deepseek-v3 --tokens 64 --precision fp8", "--precision", "fp8");
  expect_input_error(ok + "--shape deepseek-v3 --tokens 64 --impl fused", "--impl", "fused");
  expect_input_error(ok + "--shape deepseek-v3 --tokens 64 --gemm magic", "--gemm", "magic");
  expect_input_error(ok + "--shape deepseek-v3 --tokens 64 --routing /no/such/trace.json", "--routing",
                     "/no/such/trace.json");
  expect_input_error(ok + "--shape deepseek-v3 --tokens 64 --iters 0", "--iters", "0");
  expect_input_error("moe bench --gpus 0,x --shape deepseek-v3 --tokens 64", "--gpus", "0,x");
  expect_input_error("moe bench --gpus 0,0 --shape deepseek-v3 --tokens 64", "--gpus", "0");
  // 256 experts over 3 ranks.
  expect_input_error("moe bench --gpus 0,1,2 --shape deepseek-v3 --tokens 64", "--gpus", "256");
}

TEST(MoeCli, RoutingFileMustMatchTheShape) {
  if (!have_moe_subcommand()) GTEST_SKIP() << "xstage built without CUDA: no moe subcommand";
  const std::string path = testing::TempDir() + "/xstage_moe_cli_routing_" + std::to_string(getpid()) + ".json";
  {
    std::ofstream f(path);
    // 2 tokens over 4 experts, top-1: deepseek-v3 has 256 experts, top-8.
    f << R"({"schema": "xstage.routing/1", "tokens": 2, "experts": 4, "top_k": 1, "expert_ids": [0, 3], "weights": [1, 1]})";
  }
  expect_input_error("moe bench --gpus 0,1 --shape deepseek-v3 --tokens 2 --routing " + path, "--routing", "256");
  std::remove(path.c_str());
}

}  // namespace
