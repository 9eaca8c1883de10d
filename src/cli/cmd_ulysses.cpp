// `xstage attn ulysses`: the Ulysses attention layer on a team of GPUs. Checks the fused output bit for
// bit against the serial ones on fresh random inputs, then times the variants of the post-attention
// path: warm-up, then back-to-back iterations with an event at every iteration boundary and one where
// the sender's part ends (sender-side boundary), variants in a rotated order per pass, the SM clock
// after each series, medians with raw samples; and the Burst-Gap model's predictions (audit_attention).
// The measurement is the testing library's (xstage/testing/ulysses_bench.hpp); this file parses,
// checks and reports.
#include <CLI/CLI.hpp>
#include <cuda_runtime_api.h>
#include <nlohmann/json.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "cli_common.hpp"
#include "cli_gpu.hpp"
#include "registry.hpp"
#include "xstage/gpu/check.hpp"
#include "xstage/model/error.hpp"
#include "xstage/model/platform.hpp"
#include "xstage/testing/ulysses_bench.hpp"
#include "xstage/testing/ulysses_layer.hpp"

namespace xstage::cli {
void add_attn_ulysses(CLI::App* attn);
}

namespace {

using xstage::cli::out_printf;
using xstage::cli::out_stream;

using namespace xstage::attn;
using nlohmann::json;

struct Options {
  std::string gpus = "0,1";
  int seq = 0;
  int text = 0;
  int heads = 0;
  std::string variants = "all";
  int warmup = 3;
  int iters = 10;
  int passes = 2;
  bool graph = false;
  std::string platform;
  std::string store_path = "window";
  std::string tile_order = "own-last";
  std::string precision = "bf16";
  long long seed = -1;
  bool json_out = false;
  bool force = false;
  std::string out;
};

std::vector<UlyssesVariant> parse_variants(const std::string& s) {
  if (s == "all") return all_ulysses_variants();
  std::vector<UlyssesVariant> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    UlyssesVariant x;
    if (!parse_ulysses_variant(item, &x))
      throw xstage::InputError("--variant: unknown value '" + item + "' (all, " + ulysses_variant_names() + ")");
    v.push_back(x);
  }
  if (v.empty()) throw xstage::InputError("--variant: empty value");
  return v;
}

void run_ulysses(const Options& opt) {
  const std::vector<int> gpus = xstage::cli::parse_gpu_list("--gpus", opt.gpus);
  const std::vector<UlyssesVariant> variants = parse_variants(opt.variants);
  UlyssesConfig cfg;
  cfg.seq = opt.seq + opt.text;
  cfg.text = opt.text;
  cfg.heads_per_gpu = opt.heads;
  if (opt.store_path == "window") {
    cfg.store_path = UlyssesStorePath::kNcclWindow;
  } else if (opt.store_path == "peer") {
    cfg.store_path = UlyssesStorePath::kPeerPointer;
  } else {
    throw xstage::InputError("--store-path: invalid value '" + opt.store_path + "' (window or peer)");
  }
  if (!parse_ulysses_tile_order(opt.tile_order, &cfg.tile_order))
    throw xstage::InputError("--tile-order: invalid value '" + opt.tile_order + "' (own-last, remote-first or natural)");
  if (!attn_precision_from_name(opt.precision, &cfg.precision))
    throw xstage::InputError("--precision: unsupported value '" + opt.precision + "' (accepted: bf16, fp8)");
  const std::string why = ulysses_config_error(cfg, int(gpus.size()));
  if (!why.empty()) {
    // The reason starts with the field it concerns: name the option that sets it.
    const char* option = why.rfind("world size", 0) == 0  ? "--gpus"
                         : why.rfind("text", 0) == 0      ? "--text"
                         : why.rfind("heads", 0) == 0     ? "--heads"
                         : why.rfind("precision", 0) == 0 ? "--precision"
                                                          : "--seq";
    throw xstage::InputError(std::string(option) + ": invalid value, " + why);
  }
  const xstage::model::Platform platform = xstage::model::load_platform_or_default(opt.platform);
  if (!opt.out.empty()) xstage::cli::check_output_path("--out", opt.out, opt.force, {opt.platform});
  xstage::cli::require_cuda_devices("attn ulysses", gpus);

  xstage::testing::UlyssesBenchRun run = xstage::testing::run_ulysses_bench(
      gpus, cfg, variants,
      {opt.seq, opt.text, opt.store_path, opt.tile_order, opt.warmup, opt.iters, opt.passes, opt.graph, opt.seed},
      platform);
  json& result = run.result;  // stamped in place, then written and printed
  xstage::cli::stamp_json(result, "xstage.attn.ulysses/1", opt.platform, platform);
  if (!opt.out.empty()) xstage::cli::write_file_atomically(opt.out, result.dump(2) + "\n", opt.force, {opt.platform});
  if (opt.json_out) {
    xstage::cli::print_json(result);
  } else {
    std::vector<std::vector<std::string>> rows;
    for (const auto& r : run.rows) rows.push_back({r[0], r[1], r[2]});
    xstage::cli::print_table({"variant", "sender us", "iteration us"}, rows);
    out_printf("bit-identical: %s\n", run.bit_identical ? "yes" : "NO");
  }
  if (!run.bit_identical) throw xstage::gpu::DeviceError("ulysses: fused output differs from the serial output (see check)");
}

}  // namespace

namespace xstage::cli {

void add_attn_ulysses(CLI::App* attn) {
  auto opt = std::make_shared<Options>();
  CLI::App* u = attn->add_subcommand("ulysses", "Ulysses attention layer: fused post-attention All-to-All vs baselines");
  add_gpus_option(u, opt->gpus, "Devices of the team");
  u->add_option("--seq", opt->seq, "Sequence length M (image tokens, whole layer)")->required()->check(kPositive);
  u->add_option("--text", opt->text, "Joint text tokens appended to the sequence")->check(kNonNegative);
  u->add_option("--heads", opt->heads, "Heads per GPU (total heads = heads x GPUs)")->required()->check(kPositive);
  u->add_option("--variant", opt->variants,
                "all, or a comma list of " + ulysses_variant_names());
  u->add_option("--warmup", opt->warmup, "Untimed iterations of each variant before each pass")->check(kNonNegative);
  u->add_option("--iters", opt->iters, "Timed iterations of each variant per pass (variants interleaved)")->check(kPositive);
  u->add_option("--passes", opt->passes, "Timing passes (variant order rotated each pass)")->check(kPositive);
  u->add_flag("--graph", opt->graph,
              "Capture each pass (warm-up and timed iterations) into one CUDA graph per GPU and replay it (default: "
              "stream launches)");
  u->add_option("--store-path", opt->store_path, "Remote stores through the NCCL window (window) or CUDA peer pointers (peer)");
  u->add_option("--tile-order", opt->tile_order,
                "own-last (each rank's own rows are the last query tiles of every head; default), remote-first "
                "(as own-last, and every head's tiles holding other ranks' rows run before any own-row tile) or natural");
  u->add_option("--precision", opt->precision,
                "Attention operand precision of every variant: bf16 (default), or fp8 (8-bit GEMMs after a quantization "
                "pre-pass counted in each iteration; head_dim 128)");
  add_seed_option(u, opt->seed, "Input seed");
  add_platform_option(u, opt->platform);
  add_json_option(u, opt->json_out, "Print the result as JSON");
  add_out_option(u, opt->out, "Also write the JSON result to this file");
  add_force_option(u, opt->force);
  u->callback([opt]() { run_ulysses(*opt); });
}

}  // namespace xstage::cli

// `attn ulysses` is added by `attn` (add_attn_ulysses); this entry only links the file in.
namespace xstage::cli {
void register_cmd_ulysses(std::vector<Subcommand>&) {}
}  // namespace xstage::cli
