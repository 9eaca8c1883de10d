// `xstage attn bench` input validation, run as a user runs it: bad values give one line naming the
// option and the value, exit code 2, before any GPU is touched (so this runs without a GPU).
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <string>

namespace {

struct AttnCliRun {
  int code;
  std::string err;
};

AttnCliRun run_attn_cli(const std::string& args) {
  const std::string err_path = testing::TempDir() + "/xstage_attn_cli_stderr.txt";
  const std::string cmd = std::string(XSTAGE_CLI_PATH) + " " + args + " >/dev/null 2>" + err_path;
  const int status = std::system(cmd.c_str());
  std::ifstream e(err_path);
  std::string err((std::istreambuf_iterator<char>(e)), std::istreambuf_iterator<char>());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, err};
}

// The subcommand exists only in builds with CUDA.
bool have_attn_subcommand() { return run_attn_cli("attn --help").code == 0; }

void expect_input_error(const std::string& args, const std::string& option, const std::string& value) {
  const AttnCliRun r = run_attn_cli(args);
  EXPECT_EQ(r.code, 2) << args << "\nstderr: " << r.err;
  EXPECT_NE(r.err.find(option), std::string::npos) << "stderr: " << r.err;
  EXPECT_NE(r.err.find(value), std::string::npos) << "stderr: " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "stderr: " << r.err;
}

TEST(AttnCli, BadValuesNameTheOptionAndValue) {
  if (!have_attn_subcommand()) GTEST_SKIP() << "built without CUDA: no attn subcommand";
  expect_input_error("attn bench --seq 0 --heads 3", "--seq", "0");
  expect_input_error("attn bench --seq 1024 --heads -2", "--heads", "-2");
  expect_input_error("attn bench --seq 1024 --heads 3 --head-dim 96", "--head-dim", "96");
  expect_input_error("attn bench --seq 1024 --heads 3 --batch 0", "--batch", "0");
  expect_input_error("attn bench --seq 1024 --heads 3 --iters abc", "--iters", "abc");
}

TEST(AttnCli, MissingRequiredOptionIsAnError) {
  if (!have_attn_subcommand()) GTEST_SKIP() << "built without CUDA: no attn subcommand";
  const AttnCliRun r = run_attn_cli("attn bench --heads 3");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--seq"), std::string::npos) << r.err;
}

}  // namespace
