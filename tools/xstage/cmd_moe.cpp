// `xstage moe bench`: the expert-parallel MoE layer over a team of GPUs (one process, one thread per
// GPU): correctness check against the CPU reference on sampled tokens, then timing with per-stage
// CUDA events (dispatch, linear-1, SwiGLU, linear-2, combine), medians over many runs, JSON with
// provenance.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <tuple>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "cli_common.hpp"
#include "cli_gpu.hpp"
#include "moe_baseline.hpp"
#include "moe_fused.hpp"
#include "moe_reference.hpp"
#include "registry.hpp"
#include "xstage/comm/team.hpp"
#include "xstage/gpu/check.hpp"
#include "xstage/gpu/provenance.hpp"
#include "xstage/model/error.hpp"
#include "xstage/model/stats.hpp"
#include "xstage/model/platform.hpp"
#include "xstage/model/units.hpp"
#include "xstage/model/workloads.hpp"
#include "xstage/moe/moe_fused_layout.hpp"
#include "xstage/moe/routing.hpp"
#include "xstage/sim/moe_schedules.hpp"

namespace {

using xstage::cli::out_printf;
using xstage::cli::out_stream;

using namespace xstage;
using namespace xstage::moe;

struct BenchOptions {
  std::string gpus = "0,1";
  std::string shape;
  int tokens = 0;
  std::string routing = "balanced";
  double zipf_s = cli::kDefaultZipfS;
  std::string precision = "bf16";
  std::string impl = "baseline";
  std::string schedule = "interleaved";
  std::string combine = "piggyback";  // fused: where the Combine stores are issued (epilogue, piggyback, both)
  int lead_rows = 0;
  int experts_per_wave = 0;
  std::string platform;  // --schedule auto / both: the prediction's platform (default: embedded)
  double sm_tflops = cli::kDefaultSmTflops;  // per SM, for the prediction's tile times
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
  bool json = false;
  bool force = false;
  std::string out;
};

std::string known_shapes() {
  std::string s;
  for (const auto& m : model::builtin_moe_shapes()) s += (s.empty() ? "" : ", ") + std::string(m.name);
  return s;
}

// One routing per rank: generated (seeded per rank) or from a trace file holding either ranks·T tokens
// (rank r takes tokens [r·T, (r+1)·T)) or T tokens (every rank replays it).
std::vector<Routing> make_routing(const BenchOptions& o, const MoeDims& d, std::uint64_t seed) {
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

double median_of(const std::vector<double>& v) { return v.empty() ? 0.0 : stats::median(v); }

struct CheckResult {
  bool passed = false;
  double rel_l2 = 0;
  long long non_finite = 0;
  int tokens_checked = 0;
  int experts_fetched = 0;
  // FP8: tokens outside their rounding allowance (check_within_flips) and the worst error / allowance.
  int fp8_tokens_over = 0;
  double fp8_worst_ratio = 0;
};

// The reference rule of each layer: its precision and, for FP8, the Linear-2 input's scale group.
MoePrecision precision_of(const MoeFused& l) { return l.precision(); }
int l2_group_of(const MoeFused&) { return MoeFused::kFp8L2Group; }
MoePrecision precision_of(const MoeBaseline& l) { return l.precision(); }
int l2_group_of(const MoeBaseline&) { return kFp8GroupSize; }

MoePrecision parse_precision(const std::string& p) {
  if (p == "bf16") return MoePrecision::kBf16;
  if (p == "fp8") return MoePrecision::kFp8;
  throw InputError("--precision: unknown precision '" + p + "' (bf16, fp8)");
}

// All outputs must be finite (they were poisoned with NaN); sampled tokens of every rank must match the
// CPU reference of the layer's precision. Each needed expert's weights come back from its GPU once and
// are prepared (FP8: quantized) once; `prepared`, when given, keeps them for the next layer checked with
// the same weights and precision (the layers of one bench are filled from one seed).
template <class Layer>
CheckResult check_against_reference(const Layer& layer, const std::vector<Routing>& routing, int per_rank,
                                    std::map<int, PreparedExpert>* prepared = nullptr) {
  const MoeDims& d = layer.dims();
  CheckResult c;
  std::vector<std::vector<float>> y(d.ranks), x(d.ranks);
  std::vector<std::vector<int>> picked(d.ranks);
  for (int r = 0; r < d.ranks; ++r) {
    y[r] = layer.output(r);
    for (float v : y[r]) c.non_finite += !std::isfinite(v);
    x[r] = layer.tokens(r);
    const int n = std::min(per_rank, d.tokens);
    for (int i = 0; i < n; ++i) picked[r].push_back(int((long long)i * d.tokens / n + (d.tokens / n) / 2) % d.tokens);
  }
  // Expert outputs of every (rank, picked token, j), computed expert by expert.
  std::map<int, std::vector<std::pair<int, int>>> by_expert;  // expert -> (rank, index into picked)
  for (int r = 0; r < d.ranks; ++r)
    for (size_t i = 0; i < picked[r].size(); ++i)
      for (int j = 0; j < d.top_k; ++j) by_expert[routing[r].expert_ids[size_t(picked[r][i]) * d.top_k + j]].push_back({r, int(i)});
  std::map<std::tuple<int, int, int>, std::vector<float>> expert_out;  // (rank, i, expert) -> row
  std::map<std::tuple<int, int, int>, double> expert_flip;              // FP8: its one-step flip effect
  std::map<int, PreparedExpert> local;
  std::map<int, PreparedExpert>& cache = prepared != nullptr ? *prepared : local;
  for (auto& [e, users] : by_expert) {
    auto it = cache.find(e);
    if (it == cache.end()) {
      std::vector<float> w1, w2;
      layer.expert_weights(e, w1, w2);
      it = cache.emplace(e, prepare_expert(w1.data(), w2.data(), d.hidden, d.h_inter, precision_of(layer))).first;
    }
    const PreparedExpert& pe = it->second;
    ++c.experts_fetched;
    for (auto [r, i] : users) {
      auto& row = expert_out[{r, i, e}];
      if (!row.empty()) continue;
      row.resize(d.hidden);
      moe_reference_expert(d, precision_of(layer), pe, &x[r][size_t(picked[r][i]) * d.hidden], row.data(),
                           l2_group_of(layer), &expert_flip[{r, i, e}]);
    }
  }
  std::vector<float> got;
  MoeFp8Reference ref;  // the sampled tokens' reference rows and, FP8, their rounding allowances
  for (int r = 0; r < d.ranks; ++r) {
    for (size_t i = 0; i < picked[r].size(); ++i) {
      const int t = picked[r][i];
      std::vector<const float*> rows(d.top_k);
      double bound = 0;
      for (int j = 0; j < d.top_k; ++j) {
        const std::tuple<int, int, int> key{r, int(i), routing[r].expert_ids[size_t(t) * d.top_k + j]};
        rows[j] = expert_out[key].data();
        bound += std::fabs(double(routing[r].weights[size_t(t) * d.top_k + j])) * expert_flip[key];
      }
      std::vector<float> yr(d.hidden);
      moe_reference_combine(d.hidden, d.top_k, rows.data(), &routing[r].weights[size_t(t) * d.top_k], yr.data());
      ref.y.insert(ref.y.end(), yr.begin(), yr.end());
      ref.flip_bound.push_back(float(bound));
      got.insert(got.end(), y[r].begin() + size_t(t) * d.hidden, y[r].begin() + size_t(t + 1) * d.hidden);
      ++c.tokens_checked;
    }
  }
  c.rel_l2 = relative_l2_error(got.data(), ref.y.data(), ref.y.size());
  if (precision_of(layer) == MoePrecision::kFp8) {
    // Few tokens are sampled here, and the Tensor Cores round some values to the neighbouring code where the
    // reference does not: each sampled row within 4 e4m3 steps of its most sensitive Linear-2 input
    // values plus 1e-2 of its norm (the fused GPU tests' per-token check; tests/cpu/test_moe_fp8_check.cpp).
    const MoeFlipCheck f = check_within_flips(got.data(), ref, d.hidden, kFp8CheckFlips, kFp8CheckRel);
    c.fp8_tokens_over = f.tokens_over;
    c.fp8_worst_ratio = f.worst_ratio;
    c.passed = c.non_finite == 0 && f.tokens_over == 0;
  } else {
    c.passed = c.non_finite == 0 && c.rel_l2 < 1e-2;
  }
  return c;
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
constexpr const char* kNvlinkBytesFormula =
    "rows routed to another rank, all ranks * (dispatch row: hidden * 2 bytes bf16, or hidden + 4 * hidden / 128 "
    "FP8 + combine row: hidden * 2 bytes)";

double layer_flops(const MoeDims& d) { return double(d.ranks) * d.tokens * d.top_k * 6.0 * d.hidden * d.h_inter; }

// What every bench result records of the layer it ran: shape, ranks, tokens and routing.
void put_layer_json(nlohmann::json& j, const BenchOptions& o, const model::MoeShape& shape, const MoeDims& d,
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
  const double med = median_of(layer_ms);
  return {{"layer_median_ms", med},
          {"layer_min_ms", *std::min_element(layer_ms.begin(), layer_ms.end())},
          {"layer_max_ms", *std::max_element(layer_ms.begin(), layer_ms.end())},
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

double percentile_of(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(q * double(v.size() - 1) + 0.5))];
}

// Per-tile stamps of one traced run (all ranks): Linear-2 remote-store span T_RS (issue of the Combine
// stores, eq. 15's quantity), the MMA role's wait at tile entry for its first operands (per stage), and
// the sum of those waits per CTA.
// The traced tiles of every rank (MoeFused::last_trace, CTA by CTA), read from the devices once per run.
using RankTraces = std::vector<std::vector<MoeFusedTileTrace>>;
RankTraces read_traces(const MoeFused& fused, const MoeDims& d) {
  RankTraces out;
  for (int r = 0; r < d.ranks; ++r) out.push_back(fused.last_trace(r));
  return out;
}

nlohmann::json trace_summary(const RankTraces& traces) {
  std::vector<double> t_rs, wait1, wait2, mainloop2, per_cta_wait;
  for (const auto& tiles : traces) {
    double cta_wait = 0;
    for (size_t i = 0; i < tiles.size(); ++i) {
      const auto& t = tiles[i];
      if (i > 0 && t.cta != tiles[i - 1].cta) {  // next CTA
        per_cta_wait.push_back(cta_wait);
        cta_wait = 0;
      }
      const double w = double(t.t_first_stage - t.t_entry) * 1e-3;
      cta_wait += w;
      if (t.stage == 1) {
        wait1.push_back(w);
      } else {
        wait2.push_back(w);
        t_rs.push_back(double(t.t_store_end - t.t_store_begin) * 1e-3);
        mainloop2.push_back(double(t.t_store_begin - t.t_first_stage) * 1e-3);
      }
    }
    if (!tiles.empty()) per_cta_wait.push_back(cta_wait);
  }
  auto stats = [](const std::vector<double>& v) {
    return nlohmann::json{{"count", v.size()}, {"median_us", median_of(v)}, {"p90_us", percentile_of(v, 0.9)},
                          {"max_us", v.empty() ? 0.0 : *std::max_element(v.begin(), v.end())}};
  };
  return {{"linear2_remote_store_span", stats(t_rs)},
          {"linear2_mainloop_and_staging", stats(mainloop2)},
          {"linear1_mma_wait_at_entry", stats(wait1)},
          {"linear2_mma_wait_at_entry", stats(wait2)},
          {"mma_wait_sum_per_cta", stats(per_cta_wait)}};
}

// The layer a bench run describes: the shape, the team's devices and the dimensions. Input errors are
// raised here, before any device is touched.
struct BenchLayer {
  const model::MoeShape* shape;
  std::vector<int> gpus;
  MoeDims d;
};
BenchLayer bench_layer(const BenchOptions& o) {
  const model::MoeShape* shape = model::find_moe_shape(o.shape);
  if (!shape) throw InputError("--shape: unknown shape '" + o.shape + "' (known: " + known_shapes() + ")");
  std::vector<int> gpus = cli::parse_gpu_list("--gpus", o.gpus);
  const MoeDims d{int(gpus.size()), o.tokens, shape->hidden, shape->h_inter, shape->experts, shape->top_k};
  if (d.experts % d.ranks != 0) {
    throw InputError(fmt::format("--gpus: {} GPUs do not divide the {} experts of {}", d.ranks, d.experts, o.shape));
  }
  return {shape, std::move(gpus), d};
}

std::uint64_t bench_seed(const BenchOptions& o) {
  return o.seed >= 0 ? std::uint64_t(o.seed) : (std::uint64_t(std::random_device{}()) << 32 | std::random_device{}());
}

void require_devices(const std::vector<int>& gpus) { cli::require_cuda_devices("moe bench", gpus); }


// Wave vs interleaved before launch: the calibrated platform and the simulator (Combine bursts into
// the path, Linear-1 → Linear-2 row dependencies) over this routing's receive layout, per rank; the
// slower rank's makespan decides, as the layer ends with it.
struct SchedulePrediction {
  nlohmann::json j;
  MoeFusedSchedule choice = MoeFusedSchedule::kWave;
};
SchedulePrediction predict_schedule(const BenchOptions& o, const model::MoeShape& shape, const MoeDims& d,
                                    const std::vector<long long>& load, int grid, int lead_rows, int experts_per_wave) {
  const model::Platform platform = model::load_platform_or_default(o.platform);
  const double sm_flops = o.sm_tflops * 1e12;
  const model::MoeInput in = model::moe_input_for_shape(shape, grid, sm_flops, 128, 128, 2);
  sim::MoeOrderParams p;
  sim::set_tile_counts(in, p);
  p.instances = grid / 2;
  p.lead_rows = lead_rows;
  p.experts_per_wave = experts_per_wave;
  // The Combine issue of the runs this prediction is for (with --combine both: the default, piggybacked).
  const sim::MoeCombineModel combine = sim::moe_combine_model(o.combine);
  const sim::MoeTileCosts costs =
      sim::moe_tile_costs(platform, in, p.instances, sim::moe_remote_share(d.ranks), combine);
  double wave = 0, inter = 0;
  nlohmann::json ranks = nlohmann::json::array();
  for (int r = 0; r < d.ranks; ++r) {
    p.rows_per_expert = sim::rows_per_local_expert(load, d.ranks, r, 128);
    const sim::MoeOrderPrediction pr = sim::predict_moe_orders(platform, p, costs);
    wave = std::max(wave, pr.wave.makespan_s);
    inter = std::max(inter, pr.interleaved.makespan_s);
    ranks.push_back({{"rank", r}, {"wave", sim::to_json(pr.wave)}, {"interleaved", sim::to_json(pr.interleaved)}});
  }
  SchedulePrediction out;
  const double speedup = wave / inter;
  out.choice = sim::choose_moe_order(speedup) == sim::MoeOrder::kInterleaved ? MoeFusedSchedule::kInterleaved
                                                                            : MoeFusedSchedule::kWave;
  out.j = {{"choice", to_string(out.choice)}, {"predicted_speedup", speedup}, {"tie_band", sim::kMoeOrderTieBand},
           {"platform", platform.name}, {"sm_tflops", sm_flops / 1e12}, {"lead_rows", lead_rows},
           {"experts_per_wave", experts_per_wave}, {"producers", grid},
           {"combine", sim::to_string(combine)},
           {"remote_share", sim::moe_remote_share(d.ranks)},
           {"wave_makespan_us", units::s_to_us(wave)}, {"interleaved_makespan_us", units::s_to_us(inter)}, {"ranks", ranks}};
  return out;
}

// Per-CTA activity of one traced run, all CTAs of all ranks: the share of the CTA's span (first tile
// entry to last tile end) spent waiting for operands at tile entry, in mainloops (Tensor-Core work and
// staging) and issuing Combine stores. A tile ends where the next tile of the CTA enters.
nlohmann::json activity_summary(const RankTraces& traces) {
  std::vector<double> wait_share, work_share, store_share;
  for (const auto& tiles : traces) {
    for (size_t i = 0; i < tiles.size();) {
      size_t k = i;
      double wait = 0, store = 0;
      while (k < tiles.size() && tiles[k].cta == tiles[i].cta) {
        wait += double(tiles[k].t_first_stage - tiles[k].t_entry);
        if (tiles[k].stage == 2) store += double(tiles[k].t_store_end - tiles[k].t_store_begin);
        ++k;
      }
      const auto& last = tiles[k - 1];
      const double end = double(last.stage == 2 ? last.t_store_end : last.t_first_stage);
      const double span = end - double(tiles[i].t_entry);
      if (span > 0) {
        wait_share.push_back(wait / span);
        store_share.push_back(store / span);
        work_share.push_back(1.0 - (wait + store) / span);
      }
      i = k;
    }
  }
  auto stats = [](const std::vector<double>& v) {
    return nlohmann::json{{"median", median_of(v)}, {"p10", percentile_of(v, 0.1)}, {"p90", percentile_of(v, 0.9)}};
  };
  return {{"ctas", wait_share.size()}, {"wait_share", stats(wait_share)}, {"work_share", stats(work_share)},
          {"store_share", stats(store_share)}};
}

// The tiles of the first `ctas` CTAs of every rank, stamps in us from the rank's first tile entry.
nlohmann::json timeline_json(const RankTraces& traces, int ctas) {
  nlohmann::json ranks = nlohmann::json::array();
  for (int r = 0; r < int(traces.size()); ++r) {
    const auto& tiles = traces[r];
    std::uint64_t t0 = ~0ull;
    for (const auto& t : tiles) t0 = std::min(t0, t.t_entry);
    std::map<int, nlohmann::json> by_cta;
    auto us = [&](std::uint64_t t) { return t == 0 ? 0.0 : std::round(double(t - t0)) * 1e-3; };
    for (const auto& t : tiles) {
      if (int(t.cta) >= ctas) continue;
      by_cta[int(t.cta)].push_back({t.stage, t.row, t.n, us(t.t_entry), us(t.t_first_stage), us(t.t_store_begin),
                                    us(t.t_store_end)});
    }
    nlohmann::json c = nlohmann::json::object();
    for (auto& [cta, recs] : by_cta) c[std::to_string(cta)] = recs;
    ranks.push_back({{"rank", r}, {"ctas", c}});
  }
  return {{"ranks", ranks}};
}

// --gemm-alone: per schedule, one normal run (the operands), then the fused kernel in GEMM-only mode
// (MoeFused::time_gemm_only), Linear-1 (+SwiGLU) tiles alone and Linear-2 tiles alone, o.warmup untimed
// and o.iters timed launches each; the per-rank median of the fused kernel's time alone (CUDA events; no
// dispatch, no dependency waits, no Combine stores). Rates: 2·rows·h·2·h_inter (Linear-1) and
// 2·rows·h_inter·h (Linear-2) over that time, rows = the rank's received rows, and the same with the
// rows padded to the kernel's 128-row expert blocks (what the tiles compute).
template <class Use>
nlohmann::json gemm_alone_json(MoeFused& fused, const BenchOptions& o, const MoeDims& d,
                               const std::vector<MoeFusedSchedule>& schedules, Use&& use,
                               const std::vector<long long>& load, const std::vector<long long>& received) {
  const int el = d.experts_per_rank();
  std::vector<long long> padded(d.ranks, 0);
  for (int e = 0; e < d.experts; ++e) padded[e / el] += (load[e] + kFusedBlockM - 1) / kFusedBlockM * kFusedBlockM;
  const double per_row[2] = {2.0 * d.hidden * 2.0 * d.h_inter, 2.0 * d.h_inter * d.hidden};
  nlohmann::json out = nlohmann::json::array();
  for (auto s : schedules) {
    use(s);
    fused.run(o.timeout_s);
    nlohmann::json x;
    x["schedule"] = to_string(s);
    x["rows_per_rank"] = received;
    x["padded_rows_per_rank"] = padded;
    x["iters"] = o.iters;
    x["warmup"] = o.warmup;
    x["timed"] = "fused kernel launch alone (CUDA events; plan and completion kernels excluded) in GEMM-only mode: "
                 "count exchange, then the stage's tiles (TMA loads, GMMA, epilogue: Linear-1 SwiGLU into local h; "
                 "Linear-2 staged in shared memory, no Combine store), completion flags; no dispatch, no waits";
    x["flops_formula"] = {{"linear1", "2 * rows * hidden * 2 * h_inter"}, {"linear2", "2 * rows * h_inter * hidden"}};
    std::string line;
    for (int mode = 1; mode <= 2; ++mode) {
      if (o.warmup > 0) (void)fused.time_gemm_only(mode, o.warmup, o.timeout_s);
      const std::vector<double> ms = fused.time_gemm_only(mode, o.iters, o.timeout_s);
      std::vector<double> tf(d.ranks), tfp(d.ranks);
      int slow = 0;
      for (int r = 0; r < d.ranks; ++r) {
        tf[r] = per_row[mode - 1] * double(received[r]) / (ms[r] * 1e-3) / 1e12;
        tfp[r] = per_row[mode - 1] * double(padded[r]) / (ms[r] * 1e-3) / 1e12;
        if (ms[r] > ms[slow]) slow = r;
      }
      const std::string key = mode == 1 ? "linear1" : "linear2";
      x[key] = {{"ms_per_rank", ms}, {"tflops_per_rank", tf}, {"padded_tflops_per_rank", tfp}, {"slower_rank", slow}};
      x[key + "_ms"] = ms[slow];
      x[key + "_tflops"] = tf[slow];
      x[key + "_padded_tflops"] = tfp[slow];
      line += fmt::format("{}{} {:.3f} ms, {:.1f} TFLOP/s ({:.1f} padded)", mode == 1 ? "" : "; ", key, ms[slow],
                          tf[slow], tfp[slow]);
    }
    if (!o.json) out_printf("gemm alone %s (slower rank): %s\n", to_string(s), line.c_str());
    out.push_back(x);
  }
  // The layer is left as a normal run leaves it.
  fused.run(o.timeout_s);
  return out;
}

// --impl fused|both: the fused layer (each schedule of --schedule) and, for both, the separate-kernel
// baseline on the same inputs, timed in alternation within one process run.
void run_bench_fused(const BenchOptions& o) {
  const auto [shape, gpus, d] = bench_layer(o);
  if (shape->hidden % 128 != 0 || shape->h_inter % 128 != 0) {
    throw InputError(fmt::format("--shape: {} has hidden {} and h_inter {}; the fused kernel needs multiples of 128",
                                 o.shape, shape->hidden, shape->h_inter));
  }
  if ((long long)d.tokens * d.top_k >= (1LL << kOriginSlotBits)) {
    throw InputError(fmt::format("--tokens: {} x top-{} slots exceed the fused kernel's 2^{}", d.tokens, d.top_k,
                                 kOriginSlotBits));
  }
  if (!o.trace_dump.empty() && !o.trace) throw InputError("--trace-dump: needs --trace (got --trace-dump " + o.trace_dump + ")");
  if (!o.trace_dump.empty()) cli::check_output_path("--trace-dump", o.trace_dump, o.force, {o.platform, o.routing});
  if ((o.trace || o.local_store_control) && !moe_fused_trace_built()) {
    throw InputError(std::string(o.trace ? "--trace" : "--local-store-control") +
                     ": this build records no fused-kernel traces (configure with -DXSTAGE_MOE_TRACE=ON)");
  }
  std::vector<MoeFusedSchedule> schedules;
  if (o.schedule == "wave" || o.schedule == "both") schedules.push_back(MoeFusedSchedule::kWave);
  if (o.schedule == "interleaved" || o.schedule == "both") schedules.push_back(MoeFusedSchedule::kInterleaved);
  if (schedules.empty() && o.schedule != "auto")
    throw InputError("--schedule: unknown schedule '" + o.schedule + "' (wave, interleaved, both, auto)");
  if (!o.platform.empty()) {  // a bad file fails before any GPU work
    try {
      (void)model::load_platform_file(o.platform);
    } catch (const InputError& e) {
      throw InputError(std::string("--platform: ") + e.what());
    }
  }
  const std::uint64_t seed = bench_seed(o);
  const std::vector<Routing> routing = make_routing(o, d, seed);
  if (!o.out.empty()) cli::check_output_path("--out", o.out, o.force, {o.platform, o.routing});
  require_devices(gpus);

  auto team = comm::Team::single_process(gpus);
  const float wscale = 2.f / std::sqrt(float(d.hidden));
  const MoePrecision precision = parse_precision(o.precision);
  std::unique_ptr<MoeBaseline> base;
  if (o.impl == "both") {
    base = std::make_unique<MoeBaseline>(team, d, o.gemm == "loop" ? GemmPath::kLoop : GemmPath::kGrouped, precision);
    base->fill_random(seed, wscale);
    for (int r = 0; r < d.ranks; ++r) base->set_routing(r, routing[r]);
  }
  MoeFusedOptions fo;
  fo.lead_rows = o.lead_rows;
  fo.experts_per_wave = o.experts_per_wave;
  MoeFused fused(team, d, fo, precision);
  const std::vector<long long> load = expert_load(routing, d.experts);
  // The prediction (auto: the choice; both: recorded beside the measurement of both orders).
  nlohmann::json prediction;
  if (o.schedule == "auto" || o.schedule == "both") {
    MoeFusedOptions x = fo;
    x.schedule = MoeFusedSchedule::kInterleaved;
    fused.set_schedule(x);
    const int lead = fused.schedule_param();
    x.schedule = MoeFusedSchedule::kWave;
    fused.set_schedule(x);
    const SchedulePrediction sp = predict_schedule(o, *shape, d, load, fused.grid(), lead, fused.schedule_param());
    prediction = sp.j;
    if (o.schedule == "auto") schedules.push_back(sp.choice);
    if (!o.json)
      out_printf("schedule prediction: wave %.1f us, interleaved %.1f us (predicted speedup %.3f): %s%s\n",
                sp.j["wave_makespan_us"].get<double>(), sp.j["interleaved_makespan_us"].get<double>(),
                sp.j["predicted_speedup"].get<double>(), o.schedule == "auto" ? "running " : "auto would choose ",
                to_string(sp.choice));
  }
  fused.fill_random(seed, wscale);
  for (int r = 0; r < d.ranks; ++r) fused.set_routing(r, routing[r]);
  std::vector<MoeCombineIssue> combines;
  if (o.combine == "epilogue" || o.combine == "both") combines.push_back(MoeCombineIssue::kEpilogue);
  if (o.combine == "piggyback" || o.combine == "both") combines.push_back(MoeCombineIssue::kPiggyback);
  if (combines.empty()) throw InputError("--combine: unknown mode '" + o.combine + "' (epilogue, piggyback, both)");
  auto use = [&](MoeFusedSchedule s, MoeCombineIssue c) {
    MoeFusedOptions x = fo;
    x.schedule = s;
    x.combine = c;
    fused.set_schedule(x);
  };
  auto use_first = [&](MoeFusedSchedule s) { use(s, combines.front()); };  // GEMM-alone runs (no Combine stores)
  // Impl names: fused_<order> for the default Combine issue (MoeFusedOptions{}.combine), fused_<order>_<combine>
  // for the other one, so the names the scripts compare (fused_wave, fused_interleaved) are the default kernel's.
  const MoeCombineIssue default_combine = MoeFusedOptions{}.combine;
  auto impl_name = [&](MoeFusedSchedule s, MoeCombineIssue c) {
    return std::string("fused_") + to_string(s) + (c == default_combine ? "" : std::string("_") + to_string(c));
  };

  // --- correctness of each implementation (fresh inputs, poisoned outputs) ---
  struct Impl {
    std::string name;
    bool is_base;
    MoeFusedSchedule schedule;
    MoeCombineIssue combine;
    CheckResult check;
    std::vector<double> layer_ms;
    int schedule_param = 0;
  };
  std::vector<Impl> impls;
  if (base) impls.push_back({"baseline", true, MoeFusedSchedule::kWave, MoeCombineIssue::kEpilogue, {}, {}});
  for (auto s : schedules)
    for (auto c : combines)
      impls.push_back({impl_name(s, c), false, s, c, {}, {}});
  std::vector<long long> received;
  std::map<int, PreparedExpert> prepared;  // one weight set (one seed) and one precision for every layer here
  for (auto& im : impls) {
    if (im.is_base) {
      base->poison_output();
      base->run(o.timeout_s);
      im.check = check_against_reference(*base, routing, o.check_tokens, &prepared);
    } else {
      use(im.schedule, im.combine);
      im.schedule_param = fused.schedule_param();
      fused.poison_output();
      fused.run(o.timeout_s);
      im.check = check_against_reference(fused, routing, o.check_tokens, &prepared);
      received = fused.last_received_rows();
    }
  }
  // --- timing: implementations in alternation, so clocks and temperature are shared ---
  auto run_once = [&](Impl& im, bool record) {
    double ms = 0;
    if (im.is_base) {
      base->run(o.timeout_s);
      for (const auto& t : base->last_stage_times()) ms = std::max(ms, t.total_ms);
    } else {
      use(im.schedule, im.combine);
      fused.run(o.timeout_s);
      for (double v : fused.last_ms()) ms = std::max(ms, v);
    }
    if (record) im.layer_ms.push_back(ms);
  };
  for (int i = 0; i < o.warmup; ++i)
    for (auto& im : impls) run_once(im, false);
  for (int i = 0; i < o.iters; ++i)
    for (auto& im : impls) run_once(im, true);
  std::vector<double> sm_clock;
  for (int g : gpus) sm_clock.push_back(gpu::measure_sm_clock_mhz(g));

  const double flops = layer_flops(d);
  const double nvlink_bytes = double(remote_rows(routing, d)) * (dispatch_row_bytes(d.hidden, precision) + d.hidden * 2.0);
  nlohmann::json j;
  j["schema"] = "xstage.moe_bench";
  j["version"] = 2;
  j["impl"] = o.impl;
  j["precision"] = o.precision;
  put_layer_json(j, o, *shape, d, load);
  j["rows_received_per_rank"] = received;
  j["flops"] = flops;
  j["flops_formula"] = "2 * ranks * tokens * top_k * hidden * h_inter * 3";
  j["nvlink_bytes"] = nvlink_bytes;
  j["nvlink_bytes_formula"] = kNvlinkBytesFormula;
  j["fused_grid"] = fused.grid();
  j["schedule_option"] = o.schedule;
  if (!prediction.is_null()) j["schedule_prediction"] = prediction;
  j["iters"] = o.iters;
  j["warmup"] = o.warmup;
  j["sm_clock_mhz_after"] = sm_clock;
  nlohmann::json arr = nlohmann::json::array();
  bool all_passed = true;
  std::map<std::string, double> med;
  for (auto& im : impls) {
    nlohmann::json x;
    x["name"] = im.name;
    if (im.is_base) {
      x["gemm"] = to_string(base->gemm_path());
    } else {
      x["schedule"] = to_string(im.schedule);
      x["combine"] = to_string(im.combine);
      x[im.schedule == MoeFusedSchedule::kWave ? "experts_per_wave" : "lead_rows"] = im.schedule_param;
    }
    x["check"] = check_json(im.check, seed, precision);
    x["timing"] = timing_json(im.layer_ms, flops, nvlink_bytes);
    med[im.name] = median_of(im.layer_ms);
    all_passed = all_passed && im.check.passed;
    arr.push_back(x);
  }
  j["impls"] = arr;
  if (base) {
    nlohmann::json sp;
    for (auto& im : impls)
      if (!im.is_base) sp[im.name] = med["baseline"] / med[im.name];
    j["speedup_vs_baseline"] = sp;
  }
  if (med.count("fused_wave") && med.count("fused_interleaved")) {
    j["interleaved_speedup_vs_wave"] = med["fused_wave"] / med["fused_interleaved"];
    if (!prediction.is_null()) {
      // What auto would have cost here: its choice against the better of the two, both measured.
      const double chosen = med[std::string("fused_") + prediction["choice"].get<std::string>()];
      j["auto_regret"] = chosen / std::min(med["fused_wave"], med["fused_interleaved"]) - 1.0;
    }
  }
  for (auto s : schedules) {
    const std::string e = impl_name(s, MoeCombineIssue::kEpilogue), pg = impl_name(s, MoeCombineIssue::kPiggyback);
    if (med.count(e) && med.count(pg)) j["piggyback_speedup_vs_epilogue"][to_string(s)] = med[e] / med[pg];
  }
  if (o.gemm_alone) j["gemm_alone"] = gemm_alone_json(fused, o, d, schedules, use_first, load, received);
  if (o.trace || o.local_store_control) {
    // Instrumented runs after the timed ones: per schedule, stores to the token's rank, then (control)
    // the same stores into a local scratch buffer. Layer times here include the tracing barrier.
    nlohmann::json tr = nlohmann::json::array();
    nlohmann::json timelines = nlohmann::json::array();
    for (auto s : schedules) {
      // The epilogue Combine: its stores are the per-tile burst whose span T_RS is traced (piggybacked
      // stores leave with the next tile's k-steps and have no span of their own).
      use(s, MoeCombineIssue::kEpilogue);
      for (int local = 0; local < (o.local_store_control ? 2 : 1); ++local) {
        fused.set_trace(true, local == 1);
        std::vector<double> ms;
        for (int i = 0; i < o.trace_iters; ++i) {
          fused.run(o.timeout_s);
          double m = 0;
          for (double v : fused.last_ms()) m = std::max(m, v);
          ms.push_back(m);
        }
        const RankTraces traces = read_traces(fused, d);
        nlohmann::json x = trace_summary(traces);
        x["activity"] = activity_summary(traces);
        if (!o.trace_dump.empty()) {
          nlohmann::json tl = timeline_json(traces, o.trace_dump_ctas);
          tl["schedule"] = to_string(s);
          tl["combine_stores"] = local ? "local scratch (control)" : "remote (token's rank)";
          timelines.push_back(tl);
        }
        x["schedule"] = to_string(s);
        x["combine_stores"] = local ? "local scratch (control)" : "remote (token's rank)";
        x["combine"] = to_string(MoeCombineIssue::kEpilogue);
        x["layer_median_ms"] = median_of(ms);
        x["layer_samples_ms"] = ms;
        tr.push_back(x);
        out_printf("trace %s, %s stores: layer %.3f ms; L2 T_RS median %.2f us (p90 %.2f), L2 mainloop+staging %.2f us, "
                    "MMA wait at entry L1 %.2f / L2 %.2f us, wait per CTA %.1f us\n",
                    to_string(s), local ? "local" : "remote", median_of(ms),
                    x["linear2_remote_store_span"]["median_us"].get<double>(),
                    x["linear2_remote_store_span"]["p90_us"].get<double>(),
                    x["linear2_mainloop_and_staging"]["median_us"].get<double>(),
                    x["linear1_mma_wait_at_entry"]["median_us"].get<double>(),
                    x["linear2_mma_wait_at_entry"]["median_us"].get<double>(),
                    x["mma_wait_sum_per_cta"]["median_us"].get<double>());
      }
      fused.set_trace(false, false);
    }
    j["trace"] = tr;
    if (!o.trace_dump.empty()) {
      const nlohmann::json dump = {{"schema", "xstage.moe_timeline"}, {"version", 1},
                                   {"shape", shape->name}, {"tokens_per_rank", d.tokens}, {"routing", o.routing},
                                   {"ranks", d.ranks}, {"fused_grid", fused.grid()},
                                   {"record", "[stage (1: Linear-1, 2: Linear-2), row, n, entry, operands ready, "
                                              "stores begin, stores issued] in us from the rank's first tile entry; "
                                              "Linear-1 has no store stamps (0)"},
                                   {"timelines", timelines}, {"provenance", gpu::collect_provenance(gpus, 0, nullptr)}};
      cli::write_file_atomically(o.trace_dump, dump.dump() + "\n", o.force, {o.platform, o.routing}, "--trace-dump");
    }
  }
  j["provenance"] = gpu::collect_provenance(gpus, 0, nullptr);
  cli::stamp_json(j, "xstage.moe.bench/1", o.platform, model::load_platform_or_default(o.platform));
  if (!o.out.empty()) cli::write_file_atomically(o.out, j.dump(2) + "\n", o.force, {o.platform, o.routing});
  if (o.json) {
    cli::print_json(j);
  } else {
    for (auto& im : impls) {
      const double m = med[im.name];
      out_printf("moe %s %s T=%d x %d ranks, %s routing: layer %.3f ms median (%d runs), %.1f TFLOP/s, NVLink %.1f GB/s%s; "
                  "check %s (rel_l2 %.2e over %d tokens)\n",
                  im.name.c_str(), shape->name, d.tokens, d.ranks, o.routing.c_str(), m, o.iters, flops / (m * 1e-3) / 1e12,
                  nvlink_bytes / (m * 1e-3) / 1e9,
                  (base && !im.is_base) ? fmt::format(", {:.2f}x baseline", med["baseline"] / m).c_str() : "",
                  im.check.passed ? "passed" : "FAILED", im.check.rel_l2, im.check.tokens_checked);
    }
  }
  if (!all_passed) throw std::runtime_error("moe bench: correctness check failed");
}

void run_bench(const BenchOptions& o) {
  if (o.gemm_alone && o.impl == "baseline") {
    throw InputError("--gemm-alone: times the fused kernel's GEMM phases; needs --impl fused or both (got --impl " +
                     o.impl + ")");
  }
  if (o.impl == "fused" || o.impl == "both") {
    run_bench_fused(o);
    return;
  }
  if (o.impl != "baseline") {
    throw InputError("--impl: unknown implementation '" + o.impl + "' (available: baseline, fused, both)");
  }
  const MoePrecision precision = parse_precision(o.precision);
  const auto [shape, gpus, d] = bench_layer(o);
  const GemmPath gemm = o.gemm == "loop" ? GemmPath::kLoop : GemmPath::kGrouped;
  const std::uint64_t seed = bench_seed(o);
  // Input errors first, before any device is touched.
  const std::vector<Routing> routing = make_routing(o, d, seed);
  if (!o.out.empty()) cli::check_output_path("--out", o.out, o.force, {o.platform, o.routing});
  require_devices(gpus);

  auto team = comm::Team::single_process(gpus);
  MoeBaseline layer(team, d, gemm, precision);
  // Weights uniform in ±2/√hidden keep every stage's values O(1) in bf16.
  layer.fill_random(seed, 2.f / std::sqrt(float(d.hidden)));
  for (int r = 0; r < d.ranks; ++r) layer.set_routing(r, routing[r]);

  // --- correctness (fresh inputs, poisoned output) ---
  layer.poison_output();
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
      const double med = median_of(v);
      jr[std::string(stages[s]) + "_ms"] = med;
      stage_ms[stages[s]] = std::max(stage_ms[stages[s]].get<double>(), med);
    }
    std::vector<double> totals;
    for (int i = 0; i < o.iters; ++i) totals.push_back(samples[i][r].total_ms);
    jr["total_samples_ms"] = totals;
    per_rank.push_back(jr);
  }
  const double flops = layer_flops(d);
  const double med_layer = median_of(layer_ms);

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

  cli::stamp_json(j, "xstage.moe.bench/1", o.platform, model::load_platform_or_default(o.platform));
  if (!o.out.empty()) cli::write_file_atomically(o.out, j.dump(2) + "\n", o.force, {o.platform, o.routing});
  if (o.json) {
    cli::print_json(j);
  } else {
    out_printf("moe %s %s T=%d x %d ranks, %s routing (%s): layer %.3f ms median (%d runs), %.1f TFLOP/s; "
                "dispatch %.3f, L1 %.3f, SwiGLU %.3f, L2 %.3f, combine %.3f ms; check %s (rel_l2 %.2e over %d tokens)\n",
                o.impl.c_str(), shape->name, d.tokens, d.ranks, o.routing.c_str(), to_string(layer.gemm_path()), med_layer,
                o.iters, flops / (med_layer * 1e-3) / 1e12, stage_ms["dispatch"].get<double>(),
                stage_ms["linear1"].get<double>(), stage_ms["swiglu"].get<double>(), stage_ms["linear2"].get<double>(),
                stage_ms["combine"].get<double>(), check.passed ? "passed" : "FAILED", check.rel_l2, check.tokens_checked);
  }
  if (!check.passed) throw std::runtime_error("moe bench: correctness check failed");
}

void add_moe(CLI::App& root) {
  CLI::App* moe = root.add_subcommand("moe", "Expert-parallel MoE layer over a team of GPUs: check and benchmark");
  moe->require_subcommand(1);
  auto o = std::make_shared<BenchOptions>();
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
                "variant) to this JSON file (bench/moe/plot_moe_timeline.py plots them)");
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
