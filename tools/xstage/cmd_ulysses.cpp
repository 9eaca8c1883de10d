// `xstage attn ulysses`: the Ulysses attention layer on a team of GPUs. Checks the fused output bit for
// bit against the serial ones on fresh random inputs, then times the variants of the post-attention
// path: warm-up, then back-to-back iterations with an event at every iteration boundary and one where
// the sender's part ends (sender-side boundary), variants in a rotated order per pass, the SM clock
// after each series, medians with raw samples; and the Burst-Gap model's predictions (audit_attention).
#include <CLI/CLI.hpp>
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cli_common.hpp"
#include "cli_gpu.hpp"
#include "registry.hpp"
#include "xstage/testing/ulysses_layer.hpp"
#include "xstage/comm/team.hpp"
#include "xstage/gpu/check.hpp"
#include "xstage/gpu/provenance.hpp"
#include "xstage/model/audit.hpp"
#include "xstage/model/burst_gap.hpp"
#include "xstage/model/error.hpp"
#include "xstage/testing/bench_host.hpp"
#include "xstage/testing/interleaved_timing.hpp"
#include "xstage/testing/stats.hpp"

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

struct Series {
  std::vector<double> sender_s, iter_s, clock_mhz;
};

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
  const std::string why = ulysses_config_error(cfg, int(gpus.size()));
  if (!why.empty()) {
    // The reason starts with the field it concerns: name the option that sets it.
    const char* option = why.rfind("world size", 0) == 0 ? "--gpus"
                         : why.rfind("text", 0) == 0     ? "--text"
                         : why.rfind("heads", 0) == 0    ? "--heads"
                                                         : "--seq";
    throw xstage::InputError(std::string(option) + ": invalid value, " + why);
  }
  const xstage::model::Platform platform = xstage::model::load_platform_or_default(opt.platform);
  if (!opt.out.empty()) xstage::cli::check_output_path("--out", opt.out, opt.force, {opt.platform});
  xstage::cli::require_cuda_devices("attn ulysses", gpus);

  xstage::comm::disable_multicast_env();
  auto team = xstage::comm::Team::single_process(gpus);
  UlyssesLayer layer(team, cfg);
  const int n = layer.world();
  const uint64_t seed = xstage::testing::resolve_seed(opt.seed);
  layer.fill_inputs(seed);
  layer.pre_attention_a2a();
  layer.synchronize();

  // Correctness first: every variant that produces the layer's output, on poisoned buffers.
  auto outputs = [&](UlyssesVariant v) { return layer.run_and_read_outputs(v); };
  json check = json::object();
  bool all_ok = true;
  const auto serial = outputs(UlyssesVariant::kSerialOurs);
  size_t poisoned = 0;
  for (const auto& o : serial)
    for (uint16_t b : o) poisoned += b == 0xFFFF;
  check["serial_ours_unwritten_elements"] = poisoned;
  all_ok = all_ok && poisoned == 0;
  // The attention output of the local kernel (left by serial-ours) against fa-only-tma's (the fused-tma
  // kernel storing locally): the like-for-like serial baseline computes the same bits.
  std::vector<std::vector<uint16_t>> attn_local(n);
  for (int r = 0; r < n; ++r) attn_local[r] = layer.read_local_attention(r);
  std::vector<UlyssesVariant> checked = {UlyssesVariant::kSerialNccl, UlyssesVariant::kSerialTma};
  for (UlyssesVariant v : fused_ulysses_variants()) checked.push_back(v);
  for (UlyssesVariant v : checked) {
    const auto o = outputs(v);
    size_t diff = 0;
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < o[r].size(); ++i) diff += o[r][i] != serial[r][i];
    check[std::string(to_string(v)) + "_elements_differing_from_serial_ours"] = diff;
    all_ok = all_ok && diff == 0;
    if (v == UlyssesVariant::kSerialTma) {
      size_t dl = 0;
      for (int r = 0; r < n; ++r) {
        const auto a = layer.read_local_attention(r);
        for (size_t i = 0; i < a.size(); ++i) dl += a[i] != attn_local[r][i];
      }
      check["fa-only-tma_local_elements_differing_from_fa-only"] = dl;
      all_ok = all_ok && dl == 0;
    }
  }
  check["bit_identical"] = all_ok;

  // Timing: variants interleaved per iteration, in a rotated order per pass (interleaved_timing.hpp).
  const int iters = opt.iters;
  std::vector<xstage::testing::TimedStream> streams;
  for (auto& lr : team.local_ranks()) streams.push_back({lr.device, lr.stream});
  const std::vector<xstage::testing::InterleavedPass> passes = xstage::testing::time_interleaved(
      streams, {variants.size(), opt.warmup, iters, opt.passes, opt.graph},
      [&](size_t k, const std::vector<cudaEvent_t>& sender_done) { layer.enqueue(variants[k], sender_done); },
      record_timing_event, [&] { layer.synchronize(); });
  std::map<UlyssesVariant, Series> series;
  json order = json::array();
  for (const auto& p : passes) {
    json po = json::array();
    for (size_t k : p.order) po.push_back(to_string(variants[k]));
    for (size_t k = 0; k < variants.size(); ++k) {
      Series& s = series[variants[k]];
      s.sender_s.insert(s.sender_s.end(), p.sender_s[k].begin(), p.sender_s[k].end());
      s.iter_s.insert(s.iter_s.end(), p.iter_s[k].begin(), p.iter_s[k].end());
    }
    for (size_t k = 0; k < variants.size(); ++k) series[variants[k]].clock_mhz.push_back(p.sm_clock_mhz);
    order.push_back(po);
  }

  json jv = json::object();
  std::map<UlyssesVariant, double> med_s, med_i;
  for (auto& [v, s] : series) {
    med_s[v] = xstage::testing::median(s.sender_s);
    med_i[v] = xstage::testing::median(s.iter_s);
    json a = json::array(), b = json::array();
    for (double x : s.sender_s) a.push_back(x * 1e6);
    for (double x : s.iter_s) b.push_back(x * 1e6);
    jv[to_string(v)] = {{"sender_median_us", med_s[v] * 1e6}, {"iteration_median_us", med_i[v] * 1e6},
                        {"sender_samples_us", a}, {"iteration_samples_us", b}, {"sm_clock_mhz_after", s.clock_mhz}};
  }
  auto has = [&](UlyssesVariant v) { return series.count(v) > 0; };
  json metrics = json::object();
  using xstage::model::hiding_ratio;
  using xstage::model::residual_s;
  using xstage::model::speedup;
  const auto FA = UlyssesVariant::kFaOnly;
  for (const char* boundary : {"sender", "iteration"}) {
    auto& med = std::string(boundary) == "sender" ? med_s : med_i;
    json m = json::object();
    for (UlyssesVariant f : fused_ulysses_variants()) {
      if (!has(f) || !has(FA)) continue;
      json x = {{"residual_us", residual_s(med[f], med[FA]) * 1e6},
                {"residual_fraction_of_fa", residual_s(med[f], med[FA]) / med[FA]}};
      for (UlyssesVariant ser : {UlyssesVariant::kSerialOurs, UlyssesVariant::kSerialNccl}) {
        if (!has(ser)) continue;
        x[std::string("hiding_ratio_vs_") + to_string(ser)] = hiding_ratio(med[f], med[FA], med[ser]);
        x[std::string("speedup_vs_") + to_string(ser)] = speedup(med[ser], med[f]);
      }
      // Like for like: the same kernel storing locally (fa-only-tma) and its serial (serial-tma), so the
      // mainloop's code generation is the same on both sides (every fused variant is that kernel).
      const auto FT = UlyssesVariant::kFaOnlyTma, ST = UlyssesVariant::kSerialTma;
      if (has(FT)) {
        x["residual_vs_fa-only-tma_us"] = residual_s(med[f], med[FT]) * 1e6;
        x["residual_vs_fa-only-tma_fraction"] = residual_s(med[f], med[FT]) / med[FT];
        if (has(ST)) {
          x["hiding_ratio_vs_serial-tma"] = hiding_ratio(med[f], med[FT], med[ST]);
          x["speedup_vs_serial-tma"] = speedup(med[ST], med[f]);
        }
      }
      m[to_string(f)] = x;
    }
    metrics[boundary] = m;
  }

  // Model: σ from the measured attention-only time (per KV tile of the Q-loop), K = the fused grid.
  json model = nullptr;
  if (has(FA)) {
    const int64_t m_blocks = (cfg.seq + 127) / 128, tiles = m_blocks * cfg.heads_per_gpu;
    const int64_t waves = (tiles + layer.fused_grid() - 1) / layer.fused_grid();
    const int64_t kv_tiles = xstage::model::kv_tiles(cfg.seq, 128);
    xstage::model::AttentionInput in;
    in.producers = layer.fused_grid();
    in.sigma_s = med_i[FA] / double(waves * kv_tiles);
    in.seq_lens = {cfg.seq};
    in.heads_per_gpu = cfg.heads_per_gpu;
    in.completion_latency_s = 0.0;  // not measured here: E_cc below is the drain-only lower bound
    const auto audit = xstage::model::audit_attention(platform, in);
    model = xstage::model::to_json(audit, in);
    model["platform"] = platform.name;
    const auto& pt = audit.points.at(0);
    model["summary"] = {{"G_star_us", audit.recovery_gap_s * 1e6},
                        {"M_ub_star_tokens", audit.sufficient_seq_len_tokens},
                        {"sigma_us", in.sigma_s * 1e6},
                        {"predicted_E_cc_us", pt.completion_coupled_exposed_s * 1e6},
                        {"predicted_drain_residual_us", pt.drain_residual_s * 1e6},
                        {"output_bursts", pt.output_bursts}};
    // The tile order's uncovered tail: the remote bytes of the schedule's final round (slowest rank),
    // drained at R after the last Q-loop (drain only; what own-last vs remote-first changes).
    int64_t tail_bytes = 0;
    for (int r = 0; r < n; ++r) tail_bytes = std::max(tail_bytes, layer.final_round_remote_bytes(r));
    model["summary"]["final_round_remote_bytes"] = tail_bytes;
    model["summary"]["predicted_tail_drain_us"] =
        xstage::model::drain_time_s(double(tail_bytes), platform.drain_rate_bytes_per_s) * 1e6;
  }

  json first_m_blocks = json::array();  // per rank: the fused kernels' first scheduling phase
  for (int r = 0; r < n; ++r) first_m_blocks.push_back(layer.first_m_blocks(r));
  json result = {{"schema", "xstage.ulysses/1"},
                 {"seq_image", opt.seq},
                 {"seq_text", opt.text},
                 {"seq_total", cfg.seq},
                 {"world", n},
                 {"heads_per_gpu", cfg.heads_per_gpu},
                 {"heads_total", layer.heads_total()},
                 {"head_dim", cfg.head_dim},
                 {"shard_len", a2a_shard_len(cfg.seq, n)},
                 {"store_path", opt.store_path},
                 {"tile_order", opt.tile_order},
                 {"first_m_blocks", first_m_blocks},
                 {"fused_grid", layer.fused_grid()},
                 {"a2a_grid", layer.a2a_grid()},
                 {"remote_bytes_per_rank", layer.remote_bytes_per_rank(0)},
                 {"seed", seed},
                 {"warmup", opt.warmup},
                 {"iters_per_series", iters},
                 {"passes", opt.passes},
                 {"order", order},
                 {"cuda_graph", opt.graph},
                 {"timing_method",
                  std::string(opt.graph ? "each pass (warm-up and timed iterations) captured into one CUDA graph per GPU and replayed once"
                                        : "stream launches queued back to back (no CUDA graph)") +
                      ", variants interleaved per iteration in a rotated order; "
                  "per iteration: events at its start, where the sender's part ends, and its end; max over ranks; medians over all passes; "
                  "SM clock measured after each pass"},
                 {"check", check},
                 {"variants", jv},
                 {"metrics", metrics},
                 {"model", model},
                 {"provenance", xstage::gpu::collect_provenance(gpus, 0, nullptr)}};
  xstage::cli::stamp_json(result, "xstage.attn.ulysses/1", opt.platform, platform);
  if (!opt.out.empty()) xstage::cli::write_file_atomically(opt.out, result.dump(2) + "\n", opt.force, {opt.platform});
  if (opt.json_out) {
    xstage::cli::print_json(result);
  } else {
    std::vector<std::vector<std::string>> rows;
    for (auto& [v, s] : series)
      rows.push_back({to_string(v), fmt::format("{:.1f}", med_s[v] * 1e6), fmt::format("{:.1f}", med_i[v] * 1e6)});
    xstage::cli::print_table({"variant", "sender us", "iteration us"}, rows);
    out_printf("bit-identical: %s\n", all_ok ? "yes" : "NO");
  }
  if (!all_ok) throw xstage::gpu::DeviceError("ulysses: fused output differs from the serial output (see check)");
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
