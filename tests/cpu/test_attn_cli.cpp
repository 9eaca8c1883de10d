// `xstage attn bench` input validation, run as a user runs it: bad values give one line naming the
// option and the value, exit code 2, before any GPU is touched (so this runs without a GPU).
#include <gtest/gtest.h>

#include <string>

#include "cli_runner.hpp"

namespace {

void expect_input_error(const std::string& args, const std::string& option, const std::string& value) {
  const auto r = xstage::test::run_cli(args);
  EXPECT_EQ(r.code, 2) << args;
  xstage::test::expect_one_line_error(r, option, value);
}

bool have_attn_subcommand() { return xstage::test::has_subcommand("attn"); }

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
  const auto r = xstage::test::run_cli("attn bench --heads 3");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--seq"), std::string::npos) << r.err;
}

}  // namespace
