// `xstage moe bench`'s driver: the expert-parallel MoE layer over a team of GPUs (one process, one thread
// per GPU), the separate-kernel baseline, the fused kernel in each requested tile order and Combine
// issue, or both in alternation. Each implementation is checked against the CPU reference on sampled
// tokens (fresh inputs, poisoned outputs), then timed (warm-up, then --iters runs; per-stage CUDA events
// for the baseline); optional GEMM-alone timing and instrumented (traced) runs of the fused kernel.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "xstage/testing/bench_host.hpp"

namespace xstage::testing {

struct MoeBenchOptions {
  std::string gpus = "0,1";
  std::string shape;
  int tokens = 0;
  std::string routing = "balanced";  // balanced, skewed, or an xstage.routing/1 file
  double zipf_s = 0;                 // skewed routing's exponent (the caller's default)
  std::string precision = "bf16";
  std::string impl = "baseline";  // baseline, fused, both
  std::string schedule = "interleaved";
  std::string combine = "piggyback";  // fused: where the Combine stores are issued (epilogue, piggyback, both)
  int lead_rows = 0;
  int experts_per_wave = 0;
  std::string platform;  // --schedule auto / both: the prediction's platform (default: embedded)
  double sm_tflops = 0;  // per SM, for the prediction's tile times; 0: the platform's rate at `precision`
  bool trace = false;
  bool local_store_control = false;
  bool gemm_alone = false;  // fused: also time the Linear-1 and Linear-2 tiles alone (GEMM-only mode)
  int trace_iters = 5;
  std::string trace_dump;  // per-tile timelines of the first CTAs (Figure 9-like plots)
  int trace_dump_ctas = 16;
  std::string gemm = "grouped";
  int iters = 30;
  int warmup = 5;
  int check_tokens = 4;
  long long seed = -1;
  double timeout_s = 60;
  bool json = false;  // progress lines are printed only without it
  bool force = false;
  std::string out;
};

struct MoeBenchResult {
  nlohmann::json json;        // schema "xstage.moe_bench"; the caller stamps it (xstage.moe.bench/1)
  nlohmann::json trace_dump;  // xstage.moe_timeline for --trace-dump, or null
  std::string summary;        // the human lines printed without --json
  bool passed = false;        // every implementation's check
};

// Input errors (xstage::InputError naming the option) come first, before any device is touched; then
// the host's output-path and device checks; then the runs. A device failure throws gpu::DeviceError.
MoeBenchResult run_moe_bench(const MoeBenchOptions& options, const BenchHost& host);

}  // namespace xstage::testing
