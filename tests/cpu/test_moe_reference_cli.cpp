// `xstage moe bench` input validation, run as a user runs it: bad values give one line naming the
// option and the value, exit code 2, before any GPU is touched (so this runs without a GPU).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "cli_runner.hpp"

namespace {

void expect_input_error(const std::string& args, const std::string& option, const std::string& value) {
  const auto r = xstage::test::run_cli(args);
  EXPECT_EQ(r.code, 2) << args;
  xstage::test::expect_one_line_error(r, option, value);
}

bool have_moe_subcommand() { return xstage::test::has_subcommand("moe"); }

TEST(MoeCli, GemmAloneNeedsTheFusedKernel) {
  if (!have_moe_subcommand()) GTEST_SKIP() << "xstage built without CUDA: no moe subcommand";
  const std::string ok = "moe bench --gpus 0,1 --shape deepseek-v3 --tokens 64 ";
  expect_input_error(ok + "--impl baseline --gemm-alone", "--gemm-alone", "baseline");
  expect_input_error(ok + "--gemm-alone", "--gemm-alone", "baseline");  // the default implementation
}

TEST(MoeCli, BadValuesNameTheOptionAndValue) {
  if (!have_moe_subcommand()) GTEST_SKIP() << "xstage built without CUDA: no moe subcommand";
  const std::string ok = "moe bench --gpus 0,1 ";
  expect_input_error(ok + "--shape no-such-model --tokens 64", "--shape", "no-such-model");
  expect_input_error(ok + "--shape deepseek-v3 --tokens -4", "--tokens", "-4");
  expect_input_error(ok + "--shape deepseek-v3 --tokens 0", "--tokens", "0");
  expect_input_error(ok + "--shape deepseek-v3 --tokens 64 --precision fp4", "--precision", "fp4");
  expect_input_error(ok + "--shape deepseek-v3 --tokens 64 --impl magic", "--impl", "magic");
  expect_input_error(ok + "--shape deepseek-v3 --tokens 64 --impl fused --schedule zigzag", "--schedule", "zigzag");
  expect_input_error(ok + "--shape deepseek-v3 --tokens 64 --impl fused --combine later", "--combine", "later");
  expect_input_error(ok + "--shape deepseek-v3 --tokens 64 --impl fused --lead-rows -1", "--lead-rows", "-1");
  expect_input_error(ok + "--shape deepseek-v3 --tokens 64 --impl fused --schedule auto --platform /no/such/platform.json",
                     "--platform", "/no/such/platform.json");
  expect_input_error(ok + "--shape deepseek-v3 --tokens 64 --impl fused --schedule auto --sm-tflops 0", "--sm-tflops", "0");
  expect_input_error(ok + "--shape deepseek-v3 --tokens 64 --impl both --experts-per-wave -2", "--experts-per-wave", "-2");
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
