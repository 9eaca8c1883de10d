// `xstage attn bench`: options and input checks of the attention forward bench; the run itself is the
// testing library's (xstage/testing/attn_bench.hpp).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "cli_common.hpp"
#include "cli_gpu.hpp"
#include "registry.hpp"
#include "xstage/model/error.hpp"
#include "xstage/sched/attn_tile_config.hpp"
#include "xstage/testing/attn_bench.hpp"

namespace xstage::cli {
// `attn ulysses` (src/cli/cmd_ulysses.cpp), present when the communication library is built.
__attribute__((weak)) void add_attn_ulysses(CLI::App* attn);
}  // namespace xstage::cli

namespace {

struct BenchOptions : xstage::testing::AttnBenchOptions {
  std::string precision_name = "bf16";
  std::string tail_name = "split";
  bool json = false;
  bool force = false;
  std::string out;
  std::string dump_dir;
};

void run_bench(const BenchOptions& opt) {
  if (!xstage::sched::attn_head_dim_supported(opt.head_dim)) {
    throw xstage::InputError(fmt::format("--head-dim: unsupported value {} (supported: 64, 128)", opt.head_dim));
  }
  xstage::attn::AttnPrecision precision{};
  if (!xstage::attn::attn_precision_from_name(opt.precision_name, &precision)) {
    throw xstage::InputError(fmt::format("--precision: unsupported value '{}' (accepted: bf16, fp8)", opt.precision_name));
  }
  if (precision == xstage::attn::AttnPrecision::kFp8 && opt.head_dim != 128) {
    throw xstage::InputError(fmt::format("--precision fp8: --head-dim {} (the FP8 kernel supports 128)", opt.head_dim));
  }
  const int seq_kv_checked = opt.seq_kv > 0 ? opt.seq_kv : opt.seq;
  // Element counts of the largest buffers in 64-bit integers (each tensor is b x s x h x d bf16).
  xstage::cli::checked_product({{"--batch", opt.batch}, {"--seq", std::max(opt.seq, seq_kv_checked)},
                                {"--heads", opt.heads}, {"--head-dim", opt.head_dim}},
                               std::int64_t{1} << 36);
  if (!opt.out.empty()) xstage::cli::check_output_path("--out", opt.out, opt.force);
  if (!opt.dump_dir.empty())
    for (const char* f : {"q.bin", "k.bin", "v.bin", "o.bin"})
      xstage::cli::check_output_path("--dump", opt.dump_dir + "/" + f, opt.force);
  xstage::cli::require_cuda_devices("attn bench", {opt.device});

  xstage::testing::AttnBenchOptions run = opt;
  run.keep_inputs = !opt.dump_dir.empty();
  run.precision = precision;
  if (opt.tail_name != "split" && opt.tail_name != "whole") {
    throw xstage::InputError(fmt::format("--tail: unsupported value '{}' (accepted: split, whole)", opt.tail_name));
  }
  run.tail = opt.tail_name == "whole" ? xstage::attn::AttnTail::kWhole : xstage::attn::AttnTail::kSplit;
  xstage::testing::AttnBenchResult r = xstage::testing::run_attn_bench(run);
  xstage::cli::stamp_json(r.json, "xstage.attn.bench/1");
  // The dump is written once the whole run has succeeded, beside --out, so a failure leaves neither.
  for (const auto& [name, bytes] : r.dumps)
    xstage::cli::write_file_atomically(opt.dump_dir + "/" + name, bytes, opt.force, {}, "--dump");
  if (!opt.out.empty()) xstage::cli::write_file_atomically(opt.out, r.json.dump(2) + "\n", opt.force);
  if (opt.json) {
    xstage::cli::print_json(r.json);
  } else {
    xstage::cli::out_stream() << r.summary;
  }
  if (!r.passed) throw std::runtime_error("attn bench: correctness check failed");
}

void add_attn(CLI::App& root) {
  CLI::App* attn = root.add_subcommand("attn", "Attention forward kernel (Hopper, bf16 or FP8): check and benchmark");
  attn->require_subcommand(1);
  auto opt = std::make_shared<BenchOptions>();
  CLI::App* bench = attn->add_subcommand("bench", "Check against the host reference, then time (median of many runs)");
  bench->add_option("--seq", opt->seq, "Query sequence length (tokens)")->required()->check(xstage::cli::kPositive);
  bench->add_option("--seq-kv", opt->seq_kv, "Key/value sequence length (default: --seq)")->check(xstage::cli::kPositive);
  bench->add_option("--heads", opt->heads, "Heads (per GPU)")->required()->check(xstage::cli::kPositive);
  bench->add_option("--head-dim", opt->head_dim, "Head dimension (64 or 128)")->check(xstage::cli::kPositive);
  bench->add_option("--batch", opt->batch, "Batch size")->check(xstage::cli::kPositive);
  bench->add_option("--iters", opt->iters, "Timed launches")->check(xstage::cli::kPositive);
  bench->add_option("--warmup", opt->warmup, "Untimed launches first")->check(xstage::cli::kNonNegative);
  bench->add_option("--check-rows", opt->check_rows, "Query rows checked against the host reference")
      ->check(CLI::Range(2, 1 << 20));
  bench->add_option("--device", opt->device, "CUDA device ordinal")->check(xstage::cli::kNonNegative);
  xstage::cli::add_seed_option(bench, opt->seed, "Input seed");
  bench->add_flag("--lse", opt->lse, "Also write and check the log-sum-exp output");
  bench->add_option("--precision", opt->precision_name,
                    "Operand precision: bf16, or fp8 (e4m3 GEMMs after a quantization pre-pass counted in the "
                    "time; head dim 128)");
  bench->add_option("--tail", opt->tail_name,
                    "bf16: split (default: where the last round of tiles would leave most SMs idle, its key blocks "
                    "are spread over every SM) or whole (every tile on one SM)");
  xstage::cli::add_json_option(bench, opt->json, "Print the result as JSON");
  xstage::cli::add_out_option(bench, opt->out, "Also write the JSON result to this file");
  xstage::cli::add_force_option(bench, opt->force, "Replace --out and the --dump files if they exist");
  bench->add_option("--dump", opt->dump_dir, "Write q, k, v, o of the checked run (raw bf16) into this folder")
      ->check(CLI::ExistingDirectory);
  bench->callback([opt]() { run_bench(*opt); });
  if (xstage::cli::add_attn_ulysses) xstage::cli::add_attn_ulysses(attn);
}

}  // namespace

XSTAGE_SUBCOMMAND(cmd_attn, "attn", 50, add_attn);
