// `xstage moe bench`: options of the expert-parallel MoE bench; the run itself is the testing
// library's (xstage/testing/moe_bench.hpp): correctness check against the CPU reference on sampled
// tokens, then timing, JSON with provenance.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli_common.hpp"
#include "cli_gpu.hpp"
#include "registry.hpp"
#include "xstage/model/platform.hpp"
#include "xstage/testing/moe_bench.hpp"

namespace {

using namespace xstage;

void run_bench(const testing::MoeBenchOptions& o) {
  testing::BenchHost host;
  host.out = &cli::out_stream();
  host.parse_gpus = cli::parse_gpu_list;
  host.check_output = [&](const std::string& option, const std::string& path, const std::vector<std::string>& inputs) {
    cli::check_output_path(option, path, o.force, inputs);
  };
  host.require_devices = cli::require_cuda_devices;
  testing::MoeBenchResult r = testing::run_moe_bench(o, host);
  if (!r.trace_dump.is_null()) {
    cli::write_file_atomically(o.trace_dump, r.trace_dump.dump() + "\n", o.force, {o.platform, o.routing},
                               "--trace-dump");
  }
  cli::stamp_json(r.json, "xstage.moe.bench/1", o.platform, model::load_platform_or_default(o.platform));
  if (!o.out.empty()) cli::write_file_atomically(o.out, r.json.dump(2) + "\n", o.force, {o.platform, o.routing});
  if (o.json) {
    cli::print_json(r.json);
  } else {
    cli::out_stream() << r.summary;
  }
  if (!r.passed) throw std::runtime_error("moe bench: correctness check failed");
}

void add_moe(CLI::App& root) {
  CLI::App* moe = root.add_subcommand("moe", "Expert-parallel MoE layer over a team of GPUs: check and benchmark");
  moe->require_subcommand(1);
  auto o = std::make_shared<testing::MoeBenchOptions>();
  o->zipf_s = cli::kDefaultZipfS;
  CLI::App* b = moe->add_subcommand("bench", "Check against the CPU reference, then time each stage (median of many runs)");
  cli::add_gpus_option(b, o->gpus, "Devices of the team, one rank each");
  b->add_option("--shape", o->shape, "Built-in MoE shape name (an unknown name lists the known ones)")->required();
  b->add_option("--tokens", o->tokens, "Tokens per rank (T)")->required()->check(cli::kPositive);
  b->add_option("--routing", o->routing, "balanced, skewed (Zipf) or an xstage.routing/1 file");
  cli::add_zipf_option(b, o->zipf_s);
  b->add_option("--precision", o->precision, "bf16, or fp8 (e4m3 W8A8: per-128-channel activation and 128x128 weight-block scales)")->check(CLI::IsMember({"bf16", "fp8"}));
  b->add_option("--impl", o->impl,
                "Implementation: baseline (separate kernels, NCCL, cuBLAS), fused (one persistent kernel per GPU) "
                "or both (timed in alternation in one run)")
      ->check(CLI::IsMember({"baseline", "fused", "both"}));
  b->add_option("--schedule", o->schedule,
                "Fused tile order: wave, interleaved, both (timed in alternation; the prediction is recorded) or auto "
                "(the order the platform model and the simulator predict faster)")
      ->check(CLI::IsMember({"wave", "interleaved", "both", "auto"}));
  b->add_option("--combine", o->combine,
                "Fused: where a Linear-2 tile's Combine stores are issued: piggyback (default: spread over the next tile's "
                "k-steps, one 16-byte store per thread per k-step), epilogue (all at once) or both (timed in "
                "alternation; the non-default one is named fused_<order>_epilogue)")
      ->check(CLI::IsMember({"epilogue", "piggyback", "both"}));
  cli::add_platform_option(b, o->platform);
  cli::add_sm_tflops_option(b, o->sm_tflops);
  cli::add_lead_rows_option(b, o->lead_rows);
  cli::add_experts_per_wave_option(b, o->experts_per_wave);
  b->add_flag("--trace", o->trace,
              "Fused: also run instrumented (per-tile remote-store span, MMA wait at tile entry), with the epilogue "
              "Combine; needs a build configured with -DXSTAGE_MOE_TRACE=ON");
  b->add_flag("--local-store-control", o->local_store_control,
              "Fused, with --trace: also run with the Combine stores redirected to a local scratch buffer");
  b->add_flag("--gemm-alone", o->gemm_alone,
              "Fused: also time the Linear-1 and Linear-2 tiles alone (GEMM-only mode of the fused kernel: no "
              "dispatch, waits or Combine stores; --warmup and --iters launches each) and report their TFLOP/s");
  b->add_option("--trace-iters", o->trace_iters, "Instrumented runs per variant")->check(cli::kPositive);
  b->add_option("--trace-dump", o->trace_dump,
                "With --trace: write the per-tile timelines of the first CTAs of every rank (last traced run of each "
                "variant) to this JSON file (bench/moe/plot_moe_timeline.py plots them)")
      ->check(cli::kOutputPath);
  b->add_option("--trace-dump-ctas", o->trace_dump_ctas, "CTAs per rank in --trace-dump")->check(cli::kPositive);
  b->add_option("--gemm", o->gemm, "grouped (cublasGemmGroupedBatchedEx) or loop (cublasGemmEx per expert block)")
      ->check(CLI::IsMember({"grouped", "loop"}));
  b->add_option("--iters", o->iters, "Timed runs")->check(cli::kPositive);
  b->add_option("--warmup", o->warmup, "Untimed runs first")->check(cli::kNonNegative);
  b->add_option("--check-tokens", o->check_tokens, "Tokens per rank checked against the CPU reference")
      ->check(cli::kPositive);
  cli::add_seed_option(b, o->seed, "Input and routing seed");
  cli::add_timeout_option(b, o->timeout_s, "Longest wait for a rank before giving up");
  cli::add_json_option(b, o->json, "Print the result as JSON");
  cli::add_out_option(b, o->out, "Also write the JSON result to this file");
  cli::add_force_option(b, o->force);
  b->callback([o]() { run_bench(*o); });
}

}  // namespace

XSTAGE_SUBCOMMAND(cmd_moe, "moe", 60, add_moe);
