// `xstage attn ulysses` input validation, run as a user runs it: bad values give one line naming the
// option and the value before any GPU is touched (so this runs without a GPU).
#include <gtest/gtest.h>

#include <string>

#include "cli_runner.hpp"

namespace {

bool have_ulysses() { return xstage::test::run_cli("attn ulysses --help").code == 0; }

void expect_input_error(const std::string& args, const std::string& option, const std::string& value) {
  const auto r = xstage::test::run_cli(args);
  EXPECT_NE(r.code, 0) << args;
  xstage::test::expect_one_line_error(r, option, value);
}

TEST(UlyssesCli, BadValuesNameTheOptionAndValue) {
  if (!have_ulysses()) GTEST_SKIP() << "built without CUDA/NCCL: no attn ulysses subcommand";
  expect_input_error("attn ulysses --seq 0 --heads 4", "--seq", "0");
  expect_input_error("attn ulysses --seq 4096 --heads 0", "--heads", "0");
  expect_input_error("attn ulysses --seq 4096 --heads 4 --text -3", "--text", "-3");
  expect_input_error("attn ulysses --seq 4096 --heads 4 --gpus 0,x", "--gpus", "0,x");
  expect_input_error("attn ulysses --seq 4096 --heads 4 --gpus 0,0", "--gpus", "0,0");
  expect_input_error("attn ulysses --seq 4096 --heads 4 --variant fused-tma,bogus", "--variant", "bogus");
  expect_input_error("attn ulysses --seq 4096 --heads 4 --variant fused-tma,tma", "--variant", "tma");
  expect_input_error("attn ulysses --seq 4096 --heads 4 --variant coupled", "--variant", "coupled");
  expect_input_error("attn ulysses --seq 4096 --heads 4 --store-path nvshmem", "--store-path", "nvshmem");
  expect_input_error("attn ulysses --seq 4096 --heads 4 --tile-order random", "--tile-order", "random");
  expect_input_error("attn ulysses --seq 1 --heads 4 --gpus 0,1", "--seq", "1");
  expect_input_error("attn ulysses --seq 4096 --heads 4 --gpus 0,1,2,3,4,5,6,7,8", "--gpus", "9");
  expect_input_error("attn ulysses --seq 4096 --heads 4 --iters 0", "--iters", "0");
  expect_input_error("attn ulysses --seq 4096 --heads 4 --precision fp16", "--precision", "fp16");
  expect_input_error("attn ulysses --seq 4096 --heads 4 --precision FP8", "--precision", "FP8");
}

// --precision is listed with both values; a good value passes the option checks (the next refusal is
// the sequence check that follows it, before any GPU is touched).
TEST(UlyssesCli, PrecisionOptionIsDocumented) {
  if (!have_ulysses()) GTEST_SKIP() << "built without CUDA/NCCL: no attn ulysses subcommand";
  const auto help = xstage::test::run_cli("attn ulysses --help");
  EXPECT_NE(help.out.find("--precision"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("fp8"), std::string::npos) << help.out;
  expect_input_error("attn ulysses --seq 1 --heads 4 --gpus 0,1 --precision fp8", "--seq", "1");
}

// Every variant is named in --help and in the rejection message (the TMA bulk-store pair included).
TEST(UlyssesCli, VariantListNamesEveryVariant) {
  if (!have_ulysses()) GTEST_SKIP() << "built without CUDA/NCCL: no attn ulysses subcommand";
  const auto help = xstage::test::run_cli("attn ulysses --help");
  const auto bad = xstage::test::run_cli("attn ulysses --seq 4096 --heads 4 --variant nope");
  EXPECT_NE(bad.code, 0);
  for (const char* v : {"fa-only", "a2a-ours", "a2a-nccl", "serial-ours", "serial-nccl", "fused-tma", "coupled-tma",
                        "fa-only-tma", "serial-tma"}) {
    EXPECT_NE(help.out.find(v), std::string::npos) << v << " missing from --help";
    EXPECT_NE(bad.err.find(v), std::string::npos) << v << " missing from the --variant error: " << bad.err;
  }
}

// The staged and direct epilogues were pruned (docs/ulysses_notes.md, Pruned variants): their names are
// refused like any unknown value, and no longer listed.
TEST(UlyssesCli, PrunedVariantsAreRefused) {
  if (!have_ulysses()) GTEST_SKIP() << "built without CUDA/NCCL: no attn ulysses subcommand";
  for (const char* v : {"fused", "completion-coupled", "fused-direct"})
    expect_input_error(std::string("attn ulysses --seq 4096 --heads 4 --variant fused-tma,") + v, "--variant",
                       std::string("'") + v + "'");
  const auto bad = xstage::test::run_cli("attn ulysses --seq 4096 --heads 4 --variant nope");
  EXPECT_EQ(bad.err.find("fused-direct"), std::string::npos) << bad.err;
  EXPECT_EQ(bad.err.find("completion-coupled"), std::string::npos) << bad.err;
  EXPECT_EQ(bad.err.find("fused,"), std::string::npos) << bad.err;
}

TEST(UlyssesCli, MissingRequiredOptionIsAnError) {
  if (!have_ulysses()) GTEST_SKIP() << "built without CUDA/NCCL: no attn ulysses subcommand";
  const auto r = xstage::test::run_cli("attn ulysses --heads 4");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--seq"), std::string::npos) << r.err;
}

}  // namespace
