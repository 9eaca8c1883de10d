// `moe bench --impl fused|both`: the fused layer in each requested order and Combine issue, and for
// both the baseline on the same inputs, timed in alternation; schedule prediction, GEMM-alone timing
// and traced runs.
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
#include "xstage/model/units.hpp"
#include "xstage/moe/moe_fused_layout.hpp"
#include "xstage/sim/moe_order_simulation.hpp"
#include "xstage/model/stats.hpp"

namespace xstage::testing::moe_bench {

namespace {

// Wave vs interleaved before launch: the calibrated platform and the simulator (Combine bursts into
// the path, Linear-1 → Linear-2 row dependencies) over this routing's receive layout, per rank; the
// slower rank's makespan decides, as the layer ends with it.
struct SchedulePrediction {
  nlohmann::json j;
  MoeFusedSchedule choice = MoeFusedSchedule::kWave;
};
SchedulePrediction predict_schedule(const MoeBenchOptions& o, const model::MoeShape& shape, const MoeDims& d,
                                    const std::vector<long long>& load, int grid, int lead_rows, int experts_per_wave) {
  const model::Platform platform = model::load_platform_or_default(o.platform);
  sim::MoeScheduleQuery q;
  q.hidden = shape.hidden;
  q.h_inter = shape.h_inter;
  q.experts = d.experts;
  q.top_k = d.top_k;
  q.ranks = d.ranks;
  q.grid = grid;
  q.lead_rows = lead_rows;
  q.experts_per_wave = experts_per_wave;
  q.precision = o.precision;  // one source of the mainloop rate with `xstage plan`: the platform's unless given
  q.sm_flop_per_s = o.sm_tflops > 0 ? o.sm_tflops * 1e12 : 0.0;
  // The Combine issue of the runs this prediction is for (with --combine both: the default, piggybacked).
  q.combine = sim::moe_combine_model(o.combine);
  const sim::MoeSchedulePrediction sp = sim::predict_moe_schedule(platform, q, load);
  nlohmann::json ranks = nlohmann::json::array();
  for (int r = 0; r < d.ranks; ++r) {
    ranks.push_back({{"rank", r}, {"wave", sim::to_json(sp.ranks[r].wave)},
                     {"interleaved", sim::to_json(sp.ranks[r].interleaved)}});
  }
  SchedulePrediction out;
  out.choice = sp.choice == sim::MoeOrder::kInterleaved ? MoeFusedSchedule::kInterleaved : MoeFusedSchedule::kWave;
  out.j = {{"choice", to_string(out.choice)}, {"predicted_speedup", sp.predicted_speedup},
           {"tie_band", sim::kMoeOrderTieBand}, {"platform", platform.name}, {"sm_tflops", sp.sm_flop_per_s / 1e12},
           {"sm_tflops_source", o.sm_tflops > 0 ? std::string("--sm-tflops") : sp.rate_source},
           {"lead_rows", lead_rows}, {"experts_per_wave", experts_per_wave}, {"producers", grid},
           {"combine", sim::to_string(q.combine)}, {"remote_share", sim::moe_remote_share(d.ranks)},
           {"wave_makespan_us", units::s_to_us(sp.wave_makespan_s)},
           {"interleaved_makespan_us", units::s_to_us(sp.interleaved_makespan_s)}, {"ranks", ranks}};
  return out;
}

// --gemm-alone: per schedule, one normal run (the operands), then the fused kernel in GEMM-only mode
// (MoeFused::time_gemm_only), Linear-1 (+SwiGLU) tiles alone and Linear-2 tiles alone, o.warmup untimed
// and o.iters timed launches each; the per-rank median of the fused kernel's time alone (CUDA events; no
// dispatch, no dependency waits, no Combine stores). Rates: 2·rows·h·2·h_inter (Linear-1) and
// 2·rows·h_inter·h (Linear-2) over that time, rows = the rank's received rows, and the same with the
// rows padded to the kernel's 128-row expert blocks (what the tiles compute).
template <class Use>
nlohmann::json gemm_alone_json(MoeFused& fused, const MoeBenchOptions& o, const BenchHost& host, const MoeDims& d,
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
      if (o.warmup > 0) (void)MoeFusedHarness::time_gemm_only(fused, mode, o.warmup, o.timeout_s);
      const std::vector<double> ms = MoeFusedHarness::time_gemm_only(fused, mode, o.iters, o.timeout_s);
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
    if (!o.json) print_to(*host.out, "gemm alone %s (slower rank): %s\n", to_string(s), line.c_str());
    out.push_back(x);
  }
  // The layer is left as a normal run leaves it.
  fused.run(o.timeout_s);
  return out;
}

}  // namespace

// --impl fused|both: the fused layer (each schedule of --schedule) and, for both, the separate-kernel
// baseline on the same inputs, timed in alternation within one process run.
MoeBenchResult run_bench_fused(const MoeBenchOptions& o, const BenchHost& host) {
  MoeBenchResult result;
  const auto [shape, gpus, d] = bench_layer(o, host);
  if (shape->hidden % 128 != 0 || shape->h_inter % 128 != 0) {
    throw InputError(fmt::format("--shape: {} has hidden {} and h_inter {}; the fused kernel needs multiples of 128",
                                 o.shape, shape->hidden, shape->h_inter));
  }
  if ((long long)d.tokens * d.top_k >= (1LL << kOriginSlotBits)) {
    throw InputError(fmt::format("--tokens: {} x top-{} slots exceed the fused kernel's 2^{}", d.tokens, d.top_k,
                                 kOriginSlotBits));
  }
  if (!o.trace_dump.empty() && !o.trace) throw InputError("--trace-dump: needs --trace (got --trace-dump " + o.trace_dump + ")");
  if (!o.trace_dump.empty()) host.check_output("--trace-dump", o.trace_dump, {o.platform, o.routing});
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
  const std::uint64_t seed = resolve_seed(o.seed);
  const std::vector<Routing> routing = make_routing(o, d, seed);
  if (!o.out.empty()) host.check_output("--out", o.out, {o.platform, o.routing});
  host.require_devices("moe bench", gpus);

  auto team = comm::Team::single_process(gpus);
  const float wscale = 2.f / std::sqrt(float(d.hidden));
  const MoePrecision precision = parse_precision(o.precision);
  std::unique_ptr<MoeBaseline> base;
  if (o.impl == "both") {
    base = std::make_unique<MoeBaseline>(team, d, o.gemm == "loop" ? GemmPath::kLoop : GemmPath::kGrouped, precision);
    fill_random(*base, seed, wscale);
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
      print_to(*host.out, "schedule prediction: wave %.1f us, interleaved %.1f us (predicted speedup %.3f): %s%s\n",
                sp.j["wave_makespan_us"].get<double>(), sp.j["interleaved_makespan_us"].get<double>(),
                sp.j["predicted_speedup"].get<double>(), o.schedule == "auto" ? "running " : "auto would choose ",
                to_string(sp.choice));
  }
  fill_random(fused, seed, wscale);
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
      poison_output(*base);
      base->run(o.timeout_s);
      im.check = check_against_reference(*base, routing, o.check_tokens, &prepared);
    } else {
      use(im.schedule, im.combine);
      im.schedule_param = fused.schedule_param();
      poison_output(fused);
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
    med[im.name] = stats::median_or_nan(im.layer_ms);
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
  if (o.gemm_alone) j["gemm_alone"] = gemm_alone_json(fused, o, host, d, schedules, use_first, load, received);
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
        MoeFusedHarness::set_trace(fused, true, local == 1);
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
        x["layer_median_ms"] = stats::median_or_nan(ms);
        x["layer_samples_ms"] = ms;
        tr.push_back(x);
        print_to(*host.out, "trace %s, %s stores: layer %.3f ms; L2 T_RS median %.2f us (p90 %.2f), L2 mainloop+staging %.2f us, "
                    "MMA wait at entry L1 %.2f / L2 %.2f us, wait per CTA %.1f us\n",
                    to_string(s), local ? "local" : "remote", stats::median_or_nan(ms),
                    x["linear2_remote_store_span"]["median_us"].get<double>(),
                    x["linear2_remote_store_span"]["p90_us"].get<double>(),
                    x["linear2_mainloop_and_staging"]["median_us"].get<double>(),
                    x["linear1_mma_wait_at_entry"]["median_us"].get<double>(),
                    x["linear2_mma_wait_at_entry"]["median_us"].get<double>(),
                    x["mma_wait_sum_per_cta"]["median_us"].get<double>());
      }
      MoeFusedHarness::set_trace(fused, false, false);
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
      result.trace_dump = dump;
    }
  }
  j["provenance"] = gpu::collect_provenance(gpus, 0, nullptr);
  std::ostringstream lines;
  for (auto& im : impls) {
    const double m = med[im.name];
    print_to(lines, "moe %s %s T=%d x %d ranks, %s routing: layer %.3f ms median (%d runs), %.1f TFLOP/s, NVLink %.1f GB/s%s; "
             "check %s (rel_l2 %.2e over %d tokens)\n",
             im.name.c_str(), shape->name, d.tokens, d.ranks, o.routing.c_str(), m, o.iters, flops / (m * 1e-3) / 1e12,
             nvlink_bytes / (m * 1e-3) / 1e9,
             (base && !im.is_base) ? fmt::format(", {:.2f}x baseline", med["baseline"] / m).c_str() : "",
             im.check.passed ? "passed" : "FAILED", im.check.rel_l2, im.check.tokens_checked);
  }
  result.json = std::move(j);
  result.summary = lines.str();
  result.passed = all_passed;
  return result;
}

}  // namespace xstage::testing::moe_bench
