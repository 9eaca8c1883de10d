// `xstage attn bench`'s run: correctness check and timing of the attention forward kernel on one shape.
//
// The check runs on fresh random inputs with the output poisoned (NaN) beforehand: every output element
// must be written, and sampled rows must match the host reference within what a bf16 implementation
// reaches. Timing: warm-up, then many launches each between its own pair of events, inputs rotated
// over enough sets to exceed the L2 several times, median reported with the raw samples.
#pragma once

#include <nlohmann/json.hpp>

#include "xstage/attn/forward.hpp"

#include <string>
#include <utility>
#include <vector>

namespace xstage::testing {

struct AttnBenchOptions {
  int seq = 0;
  int seq_kv = 0;  // 0: same as seq
  int heads = 0;
  int head_dim = 128;
  int batch = 1;
  int iters = 50;
  int warmup = 10;
  int check_rows = 256;
  int device = 0;
  long long seed = -1;  // -1: fresh
  bool lse = false;
  xstage::attn::AttnPrecision precision = xstage::attn::AttnPrecision::kBf16;
  xstage::attn::AttnTail tail = xstage::attn::AttnTail::kSplit;  // bf16: the last round's schedule
  bool keep_inputs = false;  // return q, k, v, o of the checked run (AttnBenchResult::dumps)
};

struct AttnBenchResult {
  nlohmann::json json;  // schema "xstage.attn_bench"; the caller stamps it (xstage.attn.bench/1)
  std::string summary;  // the human line
  bool passed = false;
  std::vector<std::pair<std::string, std::string>> dumps;  // keep_inputs: file name -> raw bf16 bytes
};

// Runs on opt.device; the caller has checked the options and that the device is present.
AttnBenchResult run_attn_bench(const AttnBenchOptions& opt);

}  // namespace xstage::testing
