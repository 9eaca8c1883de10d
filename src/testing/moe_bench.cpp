// `moe bench`: the separate-kernel baseline's run, the pieces both runs share, and the entry point.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "moe_bench_internal.hpp"
#include "moe_layer_harness.hpp"
#include "xstage/comm/team.hpp"
#include "xstage/gpu/provenance.hpp"
#include "xstage/model/error.hpp"
#include "xstage/model/platform.hpp"
#include "xstage/model/work_limit.hpp"
#include "xstage/moe/routing.hpp"
#include "xstage/model/stats.hpp"

namespace xstage::testing::moe_bench {

std::string known_shapes() {
  std::string s;
  for (const auto& m : model::builtin_moe_shapes()) s += (s.empty() ? "" : ", ") + std::string(m.name);
  return s;
}

std::vector<Routing> make_routing(const MoeBenchOptions& o, const MoeDims& d, std::uint64_t seed) {
  std::vector<Routing> out;
  if (o.routing == "balanced" || o.routing == "skewed") {
    for (int r = 0; r < d.ranks; ++r) {
      const std::uint64_t s = seed * 1315423911ull + 77 + r;
      out.push_back(o.routing == "balanced" ? balanced_routing(d.tokens, d.experts, d.top_k, s)
                                            : skewed_routing(d.tokens, d.experts, d.top_k, o.zipf_s, s));
    }
    return out;
  }
  if (!std::filesystem::exists(o.routing)) {
    throw InputError("--routing: '" + o.routing + "' is neither balanced, skewed nor an existing file");
  }
  const Routing all = load_routing_file(o.routing);
  if (all.experts != d.experts || all.top_k != d.top_k) {
    throw InputError(fmt::format("--routing: {} routes over {} experts top-{}, the shape has {} experts top-{}", o.routing,
                                 all.experts, all.top_k, d.experts, d.top_k));
  }
  if (all.tokens != d.tokens && all.tokens != d.tokens * d.ranks) {
    throw InputError(fmt::format("--routing: {} holds {} tokens; need {} (--tokens) or {} (--tokens x ranks)", o.routing,
                                 all.tokens, d.tokens, d.tokens * d.ranks));
  }
  for (int r = 0; r < d.ranks; ++r) {
    const int t0 = all.tokens == d.tokens ? 0 : r * d.tokens;
    Routing x;
    x.tokens = d.tokens;
    x.experts = d.experts;
    x.top_k = d.top_k;
    x.expert_ids.assign(all.expert_ids.begin() + size_t(t0) * d.top_k, all.expert_ids.begin() + size_t(t0 + d.tokens) * d.top_k);
    x.weights.assign(all.weights.begin() + size_t(t0) * d.top_k, all.weights.begin() + size_t(t0 + d.tokens) * d.top_k);
    out.push_back(std::move(x));
  }
  return out;
}

MoePrecision parse_precision(const std::string& p) {
  if (p == "bf16") return MoePrecision::kBf16;
  if (p == "fp8") return MoePrecision::kFp8;
  throw InputError("--precision: unknown precision '" + p + "' (bf16, fp8)");
}

// Rows each rank sends to other ranks (dispatch) = rows that come back (combine): the NVLink traffic of
// the layer, the same for every implementation.
long long remote_rows(const std::vector<Routing>& routing, const MoeDims& d) {
  long long n = 0;
  const int el = d.experts_per_rank();
  for (int r = 0; r < d.ranks; ++r)
    for (int e : routing[r].expert_ids) n += e / el != r;
  return n;
}

// Routed rows per global expert, summed over the ranks' routings.
std::vector<long long> expert_load(const std::vector<Routing>& routing, int experts) {
  std::vector<long long> load(experts, 0);
  for (const auto& r : routing) {
    const auto t = tokens_per_expert(r);
    for (int e = 0; e < experts; ++e) load[e] += t[e];
  }
  return load;
}

// 2·h·2h_inter + 2·h_inter·h per routed row, all ranks.
// Bytes of one dispatched row: bf16, or e4m3 values and their per-128 scales. Combine rows are bf16.
double dispatch_row_bytes(int hidden, MoePrecision p) {
  return p == MoePrecision::kFp8 ? hidden + 4.0 * fp8_groups(hidden) : 2.0 * hidden;
}
const char* const kNvlinkBytesFormula =
    "rows routed to another rank, all ranks * (dispatch row: hidden * 2 bytes bf16, or hidden + 4 * hidden / 128 "
    "FP8 + combine row: hidden * 2 bytes)";

double layer_flops(const MoeDims& d) { return double(d.ranks) * d.tokens * d.top_k * 6.0 * d.hidden * d.h_inter; }

// What every bench result records of the layer it ran: shape, ranks, tokens and routing.
void put_layer_json(nlohmann::json& j, const MoeBenchOptions& o, const model::MoeShape& shape, const MoeDims& d,
                    const std::vector<long long>& load) {
  j["shape"] = {{"name", shape.name}, {"source", shape.source}, {"hidden", d.hidden}, {"h_inter", d.h_inter},
                {"experts", d.experts}, {"top_k", d.top_k}};
  j["ranks"] = d.ranks;
  j["tokens_per_rank"] = d.tokens;
  j["routing"] = {{"kind", o.routing}, {"zipf_s", o.routing == "skewed" ? nlohmann::json(o.zipf_s) : nlohmann::json(nullptr)},
                  {"max_expert_rows", *std::max_element(load.begin(), load.end())},
                  {"mean_expert_rows", double(d.ranks) * d.tokens * d.top_k / d.experts},
                  {"experts_without_rows", std::count(load.begin(), load.end(), 0LL)}};
}

nlohmann::json timing_json(const std::vector<double>& layer_ms, double flops, double nvlink_bytes) {
  const double med = stats::median_or_nan(layer_ms);
  return {{"layer_median_ms", med},
          {"layer_min_ms", stats::min(layer_ms)},
          {"layer_max_ms", stats::max(layer_ms)},
          {"tflops", flops / (med * 1e-3) / 1e12},
          {"nvlink_gbps", nvlink_bytes / (med * 1e-3) / 1e9},
          {"layer_samples_ms", layer_ms}};
}

nlohmann::json check_json(const CheckResult& c, std::uint64_t seed, MoePrecision p) {
  nlohmann::json j = {{"passed", c.passed}, {"rel_l2", c.rel_l2}, {"non_finite_outputs", c.non_finite},
                      {"tokens_checked", c.tokens_checked}, {"experts_checked", c.experts_fetched}, {"seed", seed}};
  if (p == MoePrecision::kFp8) {
    j["rule"] = "every sampled row within 4 e4m3 steps of its most sensitive Linear-2 input values + 1e-2 of its norm";
    j["tokens_over"] = c.fp8_tokens_over;
    j["worst_error_over_allowance"] = c.fp8_worst_ratio;
  } else {
    j["rule"] = "rel_l2 < 1e-2";
  }
  return j;
}

BenchLayer bench_layer(const MoeBenchOptions& o, const BenchHost& host) {
  const model::MoeShape* shape = model::find_moe_shape(o.shape);
  if (!shape) throw InputError("--shape: unknown shape '" + o.shape + "' (known: " + known_shapes() + ")");
  std::vector<int> gpus = host.parse_gpus("--gpus", o.gpus);
  // Work sized by --tokens is bounded before anything is allocated: the routing of every rank holds
  // tokens x top_k entries, as many as a routing file may hold.
  require_work_within("moe bench: --tokens " + std::to_string(o.tokens) + " x top_k " + std::to_string(shape->top_k) +
                          " x " + std::to_string(gpus.size()) + " ranks",
                      double(o.tokens) * shape->top_k * double(gpus.size()), double(kMaxRoutingTokens), "routed rows",
                      double(shape->hidden) * 2.0);
  const MoeDims d{int(gpus.size()), o.tokens, shape->hidden, shape->h_inter, shape->experts, shape->top_k};
  if (d.experts % d.ranks != 0) {
    throw InputError(fmt::format("--gpus: {} GPUs do not divide the {} experts of {}", d.ranks, d.experts, o.shape));
  }
  return {shape, std::move(gpus), d};
}

namespace {

// --impl baseline: the separate-kernel layer alone, with per-stage times.
MoeBenchResult run_bench_baseline(const MoeBenchOptions& o, const BenchHost& host) {
  const MoePrecision precision = parse_precision(o.precision);
  const auto [shape, gpus, d] = bench_layer(o, host);
  const GemmPath gemm = o.gemm == "loop" ? GemmPath::kLoop : GemmPath::kGrouped;
  const std::uint64_t seed = resolve_seed(o.seed);
  // Input errors first, before any device is touched.
  const std::vector<Routing> routing = make_routing(o, d, seed);
  if (!o.out.empty()) host.check_output("--out", o.out, {o.platform, o.routing});
  host.require_devices("moe bench", gpus);

  auto team = comm::Team::single_process(gpus);
  MoeBaseline layer(team, d, gemm, precision);
  // Weights uniform in ±2/√hidden keep every stage's values O(1) in bf16.
  fill_random(layer, seed, 2.f / std::sqrt(float(d.hidden)));
  for (int r = 0; r < d.ranks; ++r) layer.set_routing(r, routing[r]);

  // --- correctness (fresh inputs, poisoned output) ---
  poison_output(layer);
  layer.run(o.timeout_s);
  const std::vector<long long> received = layer.last_received_rows();
  const CheckResult check = check_against_reference(layer, routing, o.check_tokens);

  // --- timing ---
  for (int i = 0; i < o.warmup; ++i) layer.run(o.timeout_s);
  std::vector<std::vector<MoeStageTimes>> samples;  // [iter][rank]
  for (int i = 0; i < o.iters; ++i) {
    layer.run(o.timeout_s);
    samples.push_back(layer.last_stage_times());
  }
  std::vector<double> sm_clock;
  for (int g : gpus) sm_clock.push_back(gpu::measure_sm_clock_mhz(g));

  const char* stages[] = {"dispatch", "linear1", "swiglu", "linear2", "combine", "total"};
  auto field = [](const MoeStageTimes& t, int s) {
    const double v[] = {t.dispatch_ms, t.linear1_ms, t.swiglu_ms, t.linear2_ms, t.combine_ms, t.total_ms};
    return v[s];
  };
  nlohmann::json per_rank = nlohmann::json::array();
  nlohmann::json stage_ms;  // median per rank, then the slowest rank
  std::vector<double> layer_ms;  // per run: the slowest rank's total
  for (int i = 0; i < o.iters; ++i) {
    double m = 0;
    for (int r = 0; r < d.ranks; ++r) m = std::max(m, samples[i][r].total_ms);
    layer_ms.push_back(m);
  }
  for (int s = 0; s < 6; ++s) stage_ms[stages[s]] = 0.0;
  for (int r = 0; r < d.ranks; ++r) {
    nlohmann::json jr;
    jr["rank"] = r;
    jr["device"] = gpus[r];
    jr["rows_received"] = received[r];
    for (int s = 0; s < 6; ++s) {
      std::vector<double> v;
      for (int i = 0; i < o.iters; ++i) v.push_back(field(samples[i][r], s));
      const double med = stats::median_or_nan(v);
      jr[std::string(stages[s]) + "_ms"] = med;
      stage_ms[stages[s]] = std::max(stage_ms[stages[s]].get<double>(), med);
    }
    std::vector<double> totals;
    for (int i = 0; i < o.iters; ++i) totals.push_back(samples[i][r].total_ms);
    jr["total_samples_ms"] = totals;
    per_rank.push_back(jr);
  }
  const double flops = layer_flops(d);
  const double med_layer = stats::median_or_nan(layer_ms);

  nlohmann::json j;
  j["schema"] = "xstage.moe_bench";
  j["version"] = 1;
  j["impl"] = o.impl;
  j["gemm"] = to_string(layer.gemm_path());
  j["precision"] = o.precision;
  put_layer_json(j, o, *shape, d, expert_load(routing, d.experts));
  j["flops"] = flops;
  j["check"] = check_json(check, seed, layer.precision());
  j["timing"] = {{"layer_median_ms", med_layer},
                 {"layer_min_ms", *std::min_element(layer_ms.begin(), layer_ms.end())},
                 {"layer_max_ms", *std::max_element(layer_ms.begin(), layer_ms.end())},
                 {"tflops", flops / (med_layer * 1e-3) / 1e12},
                 {"stage_median_ms_slowest_rank", stage_ms},
                 {"iters", o.iters},
                 {"warmup", o.warmup},
                 {"sm_clock_mhz_after", sm_clock},
                 {"layer_samples_ms", layer_ms},
                 {"per_rank", per_rank}};
  j["provenance"] = gpu::collect_provenance(gpus, 0, nullptr);

  MoeBenchResult result;
  result.json = std::move(j);
  result.passed = check.passed;
  std::ostringstream line;
  print_to(line, "moe %s %s T=%d x %d ranks, %s routing (%s): layer %.3f ms median (%d runs), %.1f TFLOP/s; "
           "dispatch %.3f, L1 %.3f, SwiGLU %.3f, L2 %.3f, combine %.3f ms; check %s (rel_l2 %.2e over %d tokens)\n",
           o.impl.c_str(), shape->name, d.tokens, d.ranks, o.routing.c_str(), to_string(layer.gemm_path()), med_layer,
           o.iters, flops / (med_layer * 1e-3) / 1e12, stage_ms["dispatch"].get<double>(),
           stage_ms["linear1"].get<double>(), stage_ms["swiglu"].get<double>(), stage_ms["linear2"].get<double>(),
           stage_ms["combine"].get<double>(), check.passed ? "passed" : "FAILED", check.rel_l2, check.tokens_checked);
  result.summary = line.str();
  return result;
}

}  // namespace

}  // namespace xstage::testing::moe_bench

namespace xstage::testing {

MoeBenchResult run_moe_bench(const MoeBenchOptions& o, const BenchHost& host) {
  if (o.gemm_alone && o.impl == "baseline") {
    throw InputError("--gemm-alone: times the fused kernel's GEMM phases; needs --impl fused or both (got --impl " +
                     o.impl + ")");
  }
  if (o.impl == "fused" || o.impl == "both") return moe_bench::run_bench_fused(o, host);
  if (o.impl != "baseline") {
    throw InputError("--impl: unknown implementation '" + o.impl + "' (available: baseline, fused, both)");
  }
  return moe_bench::run_bench_baseline(o, host);
}

}  // namespace xstage::testing
