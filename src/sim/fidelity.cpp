#include "xstage/sim/fidelity.hpp"

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <map>
#include <set>

#include "xstage/model/bounded_text.hpp"
#include "xstage/model/burst_gap.hpp"
#include "xstage/model/calibration_fit.hpp"
#include "xstage/model/error.hpp"
#include "xstage/model/input_file.hpp"
#include "xstage/model/work_limit.hpp"
#include "xstage/model/stats.hpp"
#include "xstage/model/units.hpp"
#include "xstage/moe/moe_fused_layout.hpp"
#include "xstage/sim/design_check.hpp"
#include "xstage/sim/simulator.hpp"

namespace xstage::sim {

namespace {

using model::BurstMode;
using model::StoreTarget;

double rel_error(double pred, double meas) { return std::fabs(pred - meas) / meas; }

ErrorSummary summarize(const std::vector<double>& errs) {
  ErrorSummary s;
  s.points = static_cast<int>(errs.size());
  if (errs.empty()) return s;
  s.median_rel = stats::median(errs);
  s.max_rel = stats::max_abs(errs);
  return s;
}

void predict_periodic(const model::Platform& p, FidelityPoint& pt, int bursts, const std::vector<ZeroGapLoop>& loops) {
  const auto& r = pt.record;
  const double v = r.volume_bytes(), rate = p.drain_rate_at(r.producers);
  const double t0 = p.issue_floor_s(r.producers, r.bytes_per_producer).value;
  const double g = model::probe_model_gap_s(p, r, loops);
  pt.model_gap_s = g;
  pt.model_t_iss_s = model::issue_time_s(t0, v, rate, g);
  pt.model_t_period_s = model::period_s(t0, v, rate, g);
  SimConfig cfg;
  cfg.drain_rate_bytes_per_s = rate;
  cfg.capacity_bytes = p.capacity_bytes(r.producers).value;
  cfg.drain_ramp_s = p.knee_ramp_s;
  const std::vector<ProducerSchedule> schedules = periodic_schedules(r.producers, r.bytes_per_producer, t0, g, bursts);
  cfg.time_limit_s = schedule_time_bound_s(cfg, schedules);
  const SimResult res = simulate(cfg, schedules);
  const SteadyState ss = producer_steady_state(res, r.producers);
  pt.sim_t_iss_s = ss.issue_time_s;
  pt.sim_t_period_s = ss.period_s;
}

void predict_isolated(const model::Platform& p, FidelityPoint& pt) {
  const auto& r = pt.record;
  const double v = r.volume_bytes(), rate = p.isolated_drain_rate_at(r.producers);
  const double t0 = p.issue_floor_s(r.producers, r.bytes_per_producer).value;
  const double q = p.capacity_bytes(r.producers).value;
  pt.model_t_iss_s = model::isolated_issue_time_ramped_s(t0, v, rate, q, p.knee_ramp_s);
  // One aligned burst from an empty path; the probe reports the slowest producer (the aggregate end).
  pt.sim_t_iss_s = isolated_issue_time_s(r.producers, r.bytes_per_producer, t0, rate, q, p.knee_ramp_s);
}

}  // namespace

namespace {

// Largest lists a traced bench file may hold (real files: a few runs of 2 to 8 trace entries); the
// pairing of remote and local entries is quadratic in the entries of one run.
constexpr std::size_t kMaxBenchRuns = 4096;
constexpr std::size_t kMaxTraceEntries = 1024;

// One trace entry of a traced MoE bench run, every field checked.
struct TraceEntry {
  std::string schedule, combine_stores;
  double store_span_s = 0.0, cover_s = 0.0, wait_s = 0.0, layer_s = 0.0;
};

double median_s_of(const nlohmann::json& trace, const char* key, const std::string& origin, const std::string& where) {
  const std::string field = where + "." + key;
  const auto& stat = json_member(trace, origin, where, key);
  return units::us_to_s(
      json_number_in(json_member(stat, origin, field, "median_us"), origin, field + ".median_us", ranges::kSpanUs));
}

TraceEntry trace_entry(const nlohmann::json& t, const std::string& origin, const std::string& where) {
  TraceEntry e;
  e.schedule = json_string_in(json_member(t, origin, where, "schedule"), origin, where + ".schedule");
  e.combine_stores = json_string_in(json_member(t, origin, where, "combine_stores"), origin, where + ".combine_stores");
  e.store_span_s = median_s_of(t, "linear2_remote_store_span", origin, where);
  e.cover_s = median_s_of(t, "linear2_mainloop_and_staging", origin, where);
  e.wait_s = median_s_of(t, "linear2_mma_wait_at_entry", origin, where);
  e.layer_s = 1e-3 * json_number_in(json_member(t, origin, where, "layer_median_ms"), origin, where + ".layer_median_ms",
                                    ranges::kTimeMs);
  return e;
}

}  // namespace

// The fused MoE kernel's tiles, which the traced files do not record: b_m = moe::kFusedBlockM, b_n = 128.
constexpr double kTracedTileM = moe::kFusedBlockM;
constexpr double kTracedTileN = 128.0;

std::vector<TileStallRow> parse_tile_stall_rows(std::string_view text, const std::string& path) {
  const nlohmann::json j = parse_json_input(text, path);
  const std::string& schema = json_string_in(json_member(j, path, "", "schema"), path, "schema");
  if (schema != "xstage.moe_bench" && schema != "xstage.moe_bench_set")
    input_fail(path, "schema", "must be \"xstage.moe_bench\" or \"xstage.moe_bench_set\", got " + bounded_json(schema));
  const bool set = schema == "xstage.moe_bench_set";
  const nlohmann::json* runs = set ? &json_array_in(json_member(j, path, "", "runs"), path, "runs", kMaxBenchRuns) : nullptr;
  const std::size_t n_runs = set ? runs->size() : 1;
  std::vector<TileStallRow> out;
  for (std::size_t ri = 0; ri < n_runs; ++ri) {
    const auto& run = set ? (*runs)[ri] : j;
    const std::string where_run = set ? "runs[" + std::to_string(ri) + "]" : "";
    const auto* trace = json_optional_member(run, path, where_run, "trace");
    if (!trace) continue;  // an untraced run
    const std::string trace_field = json_field_path(where_run, "trace");
    const auto& traces = json_array_in(*trace, path, trace_field, kMaxTraceEntries);
    const std::string shape_field = json_field_path(where_run, "shape");
    const auto& shape_json = json_member(run, path, where_run, "shape");
    const std::string& shape = json_string_in(json_member(shape_json, path, shape_field, "name"), path, shape_field + ".name");
    const double h_inter = static_cast<double>(
        json_integer_in(json_member(shape_json, path, shape_field, "h_inter"), path, shape_field + ".h_inter", ranges::kGemmDim));
    std::string precision = "bf16";
    if (const auto* p = json_optional_member(run, path, where_run, "precision"))
      precision = json_string_in(*p, path, json_field_path(where_run, "precision"));
    std::vector<TraceEntry> entries;
    for (std::size_t ti = 0; ti < traces.size(); ++ti)
      entries.push_back(trace_entry(traces[ti], path, trace_field + "[" + std::to_string(ti) + "]"));
    for (const auto& t : entries) {
      if (t.combine_stores.rfind("remote", 0) != 0) continue;  // controls pair below
      TileStallRow row;
      row.source = path;
      row.shape = shape;
      row.precision = precision;
      row.schedule = t.schedule;
      row.store_span_s = t.store_span_s;
      row.cover_s = t.cover_s;
      row.predicted_stall_s = model::per_tile_stall_s(row.store_span_s, row.cover_s);
      row.wait_remote_s = t.wait_s;
      row.layer_remote_s = t.layer_s;
      row.measured_stall_s = row.wait_remote_s;
      row.tile_flop = 2.0 * kTracedTileM * kTracedTileN * h_inter;
      for (const auto& c : entries) {
        if (c.schedule != t.schedule || c.combine_stores.rfind("local", 0) != 0) continue;
        row.wait_local_s = c.wait_s;
        row.layer_local_s = c.layer_s;
        row.measured_stall_s = model::positive_part(row.wait_remote_s - row.wait_local_s);
        row.residual_s = model::residual_s(row.layer_remote_s, row.layer_local_s);
      }
      out.push_back(row);
    }
  }
  if (out.empty()) input_fail(path, set ? "runs" : "trace", "no traced run with remote Combine stores");
  return out;
}

std::vector<TileStallRow> tile_stall_rows(const std::string& path) {
  return parse_tile_stall_rows(read_input_file(path, "MoE bench"), path);
}

nlohmann::json to_json(const std::vector<TileStallRow>& rows) {
  using units::s_to_us;
  nlohmann::json a = nlohmann::json::array();
  for (const auto& r : rows) {
    nlohmann::json e = {{"source", r.source}, {"shape", r.shape}, {"precision", r.precision}, {"schedule", r.schedule},
                        {"store_span_us", s_to_us(r.store_span_s)}, {"cover_us", s_to_us(r.cover_s)},
                        {"predicted_stall_us", s_to_us(r.predicted_stall_s)},
                        {"wait_at_entry_remote_us", s_to_us(r.wait_remote_s)},
                        {"measured_stall_us", s_to_us(r.measured_stall_s)},
                        {"measured_is_upper_bound", r.wait_local_s < 0.0},
                        {"stall_error_us", s_to_us(r.predicted_stall_s - r.measured_stall_s)},
                        {"layer_remote_ms", r.layer_remote_s * 1e3}};
    if (r.wait_local_s >= 0.0) {
      e["wait_at_entry_local_us"] = s_to_us(r.wait_local_s);
      e["layer_local_ms"] = r.layer_local_s * 1e3;
      e["residual_us"] = s_to_us(r.residual_s);
      e["residual_share_of_layer"] = r.residual_s / r.layer_remote_s;
    }
    a.push_back(e);
  }
  return a;
}

std::vector<GemmRateFit> fit_gemm_rates(const std::vector<TileStallRow>& rows) {
  std::vector<GemmRateFit> out;
  for (const char* precision : {"bf16", "fp8"}) {
    GemmRateFit f;
    f.precision = precision;
    std::vector<double> rates;
    for (const auto& r : rows) {
      if (r.precision != precision || !(r.cover_s > 0.0) || !(r.tile_flop > 0.0)) continue;
      rates.push_back(r.tile_flop / r.cover_s);
      if (std::find(f.sources.begin(), f.sources.end(), r.source) == f.sources.end()) f.sources.push_back(r.source);
    }
    if (rates.empty()) continue;
    f.flop_per_s_per_sm = stats::median(rates);
    f.min_flop_per_s_per_sm = *std::min_element(rates.begin(), rates.end());
    f.max_flop_per_s_per_sm = *std::max_element(rates.begin(), rates.end());
    f.schedules = static_cast<int>(rates.size());
    out.push_back(f);
  }
  return out;
}

nlohmann::json to_json(const std::vector<GemmRateFit>& fits) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& f : fits)
    a.push_back({{"precision", f.precision}, {"tflops_per_sm", f.flop_per_s_per_sm / 1e12},
                 {"min_tflops_per_sm", f.min_flop_per_s_per_sm / 1e12}, {"max_tflops_per_sm", f.max_flop_per_s_per_sm / 1e12},
                 {"schedules", f.schedules}, {"sources", f.sources},
                 {"formula", "median over traced schedules with remote Combine stores of 2*128*128*h_inter / "
                             "median(linear2_mainloop_and_staging)"}});
  return a;
}

// Largest point list of a Ulysses sweep file (real sweeps: about ten) and the simulator work all its
// points may ask for together: producers x output bursts, the limit `xstage simulate` applies.
constexpr std::size_t kMaxSweepPoints = 4096;
constexpr double kMaxSweepProducerBursts = 1 << 24;

std::vector<UlyssesRow> parse_ulysses_rows(const model::Platform& platform, std::string_view text, const std::string& path) {
  const nlohmann::json j = parse_json_input(text, path);
  const std::string& schema = json_string_in(json_member(j, path, "", "schema"), path, "schema");
  if (schema != "xstage.ulysses_sweep/1")
    input_fail(path, "schema", "must be \"xstage.ulysses_sweep/1\", got " + bounded_json(schema));
  const auto& points = json_array_in(json_member(j, path, "", "points"), path, "points", kMaxSweepPoints, 1);
  // Every field of every point is read and checked first, and the total simulator work bounded,
  // before any point is simulated.
  struct Point {
    UlyssesRow row;
    int producers = 0;
    double burst_bytes = 0.0, remote_bytes = 0.0, fused_s = 0.0;
  };
  std::vector<Point> parsed;
  double work = 0.0;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const auto& p = points[i];
    const std::string w = "points[" + std::to_string(i) + "]";
    const auto integer = [&](const nlohmann::json& obj, const std::string& where, const char* key, const IntRange& r) {
      return json_integer_in(json_member(obj, path, where, key), path, where + "." + key, r);
    };
    const auto number = [&](const nlohmann::json& obj, const std::string& where, const char* key, const Range& r) {
      return json_number_in(json_member(obj, path, where, key), path, where + "." + key, r);
    };
    const std::string wm = w + ".model";
    const auto& m = json_member(p, path, w, "model");
    const auto& pts = json_array_in(json_member(m, path, wm, "points"), path, wm + ".points", kMaxSweepPoints, 1);
    const std::string wp = wm + ".points[0]";
    Point q;
    UlyssesRow& r = q.row;
    r.seq_len = integer(pts[0], wp, "seq_len", ranges::kSeqLen);
    r.output_bursts = integer(pts[0], wp, "output_bursts", ranges::kBursts);
    r.heads_per_gpu = static_cast<int>(integer(p, w, "heads_per_gpu", ranges::kHeads));
    r.tile_order = json_string_in(json_member(p, path, w, "tile_order"), path, w + ".tile_order");
    r.sigma_s = units::us_to_s(number(m, wm, "sigma_us", ranges::kTimeUs));
    q.producers = static_cast<int>(integer(m, wm, "producers", ranges::kProducers));
    const auto block_m = integer(m, wm, "block_m", ranges::kTileEdge);
    const auto block_n = integer(m, wm, "block_n", ranges::kTileEdge);
    const auto head_dim = integer(p, w, "head_dim", ranges::kTileEdge);
    q.burst_bytes = static_cast<double>(block_m) * static_cast<double>(head_dim) * 2.0;
    r.qloop_gap_s = model::qloop_gap_lower_bound_s(r.sigma_s, r.seq_len, block_n);
    if (!ranges::kSpanUs.contains(units::s_to_us(r.qloop_gap_s)))
      input_fail(path, wm + ".sigma_us",
                 "sigma_us x ceil(seq_len / block_n) must be a Q-loop gap " + ranges::kSpanUs.describe() + ", got " +
                     std::to_string(units::s_to_us(r.qloop_gap_s)));
    q.remote_bytes = number(p, w, "remote_bytes_per_rank", ranges::kBytes);
    const std::string wv = w + ".variants";
    const auto& v = json_member(p, path, w, "variants");
    r.fa_s = units::us_to_s(number(json_member(v, path, wv, "fa-only-tma"), wv + ".fa-only-tma", "iteration_median_us",
                                   ranges::kTimeUs));
    q.fused_s = units::us_to_s(
        number(json_member(v, path, wv, "fused-tma"), wv + ".fused-tma", "iteration_median_us", ranges::kTimeUs));
    // Each point's simulation also visits every producer per event: its time grows with producers^2 x bursts.
    require_recurring_burst_work_within(bounded_text(path, 240) + ": " + wm + ".producers with " + wp + ".output_bursts",
                                        q.producers, static_cast<double>(std::max<std::int64_t>(2, r.output_bursts)));
    work += static_cast<double>(q.producers) * static_cast<double>(std::max<std::int64_t>(2, r.output_bursts));
    parsed.push_back(q);
  }
  require_work_within(bounded_text(path, 240) + ": points: sum of model.producers x output_bursts", work,
                      kMaxSweepProducerBursts, "producer-bursts", 64.0);
  std::vector<UlyssesRow> out;
  for (auto& q : parsed) {
    UlyssesRow r = q.row;
    const RecurringBurstCheck c = recurring_burst_check(platform, q.producers, q.burst_bytes, r.qloop_gap_s,
                                                        static_cast<int>(std::max<std::int64_t>(2, r.output_bursts)));
    r.first_burst_stall_s = c.first_burst_stall_s;
    r.steady_stall_s = c.steady_stall_s;
    r.binding_bound = c.binding_bound;
    r.tail_drain_s = model::drain_time_s(q.remote_bytes / static_cast<double>(r.output_bursts), platform.drain_rate_at(q.producers));
    r.predicted_residual_s = r.first_burst_stall_s + r.steady_stall_s * static_cast<double>(r.output_bursts - 1) + r.tail_drain_s;
    r.measured_residual_s = model::residual_s(q.fused_s, r.fa_s);
    out.push_back(r);
  }
  return out;
}

std::vector<UlyssesRow> ulysses_rows(const model::Platform& platform, const std::string& path) {
  return parse_ulysses_rows(platform, read_input_file(path, "Ulysses sweep"), path);
}

nlohmann::json to_json(const std::vector<UlyssesRow>& rows) {
  using units::s_to_us;
  nlohmann::json a = nlohmann::json::array();
  for (const auto& r : rows)
    a.push_back({{"seq_len", r.seq_len}, {"heads_per_gpu", r.heads_per_gpu}, {"tile_order", r.tile_order},
                 {"sigma_us", s_to_us(r.sigma_s)}, {"qloop_gap_us", s_to_us(r.qloop_gap_s)}, {"output_bursts", r.output_bursts},
                 {"binding_bound", r.binding_bound}, {"first_burst_stall_us", s_to_us(r.first_burst_stall_s)},
                 {"steady_stall_us", s_to_us(r.steady_stall_s)}, {"tail_drain_us", s_to_us(r.tail_drain_s)},
                 {"predicted_residual_us", s_to_us(r.predicted_residual_s)}, {"fa_only_tma_us", s_to_us(r.fa_s)},
                 {"measured_residual_us", s_to_us(r.measured_residual_s)},
                 {"predicted_share_of_fa", r.predicted_residual_s / r.fa_s},
                 {"measured_share_of_fa", r.measured_residual_s / r.fa_s}});
  return a;
}

namespace {

// Runs one record's prediction; a simulation past its time limit names the record (its ordinal among the file's
// records, 1-based) and the values that sized it.
std::string record_name(const model::CalibrationRecord& r, const std::vector<model::CalibrationRecord>& records,
                        const FidelityOptions& options) {
  char what[200];
  std::snprintf(what, sizeof what, ": record %zu (%s, %d producers x %.17g bytes, gap %.6g us)",
                static_cast<std::size_t>(&r - records.data()) + 1,
                r.mode == BurstMode::kPeriodic ? "periodic" : "isolated", r.producers, r.bytes_per_producer,
                r.gap_s * 1e6);
  return bounded_text(options.records_origin, 240) + what;
}

template <class F>
void named_by_record(const model::CalibrationRecord& r, const std::vector<model::CalibrationRecord>& records,
                     const FidelityOptions& options, F&& predict) {
  try {
    predict();
  } catch (const TimeLimitError& e) {
    throw TimeLimitError(record_name(r, records, options) + ": " + e.what() +
                         "; its producers x bytes_per_producer and gap size it");
  }
}

}  // namespace

FidelityReport fidelity_report(const model::Platform& platform, const std::vector<model::CalibrationRecord>& records,
                               const FidelityOptions& options) {
  FidelityReport rep;
  std::set<std::pair<int, double>> swept;
  for (const auto& r : records)
    if (r.mode == BurstMode::kPeriodic && r.target == StoreTarget::kRemote && r.gap_s > 0.0)
      swept.insert({r.producers, r.bytes_per_producer});
  // Every record's simulation is sized before any runs: K producers against each other over its bursts.
  for (const auto& r : records)
    if (r.target != StoreTarget::kLocal)
      require_recurring_burst_work_within(record_name(r, records, options), r.producers,
                                          r.mode == BurstMode::kPeriodic ? options.periodic_bursts : 1);
  std::vector<double> pm_i, pm_p, ps_i, ps_p, sm_i, sm_p, ss_i, ss_p, im, is, km, ks;
  for (const auto& r : records) {
    if (r.target == StoreTarget::kLocal) {
      rep.local_controls.push_back(r);
      continue;
    }
    FidelityPoint pt;
    pt.record = r;
    pt.gap_sweep = r.mode == BurstMode::kPeriodic && swept.count({r.producers, r.bytes_per_producer}) > 0;
    if (r.mode == BurstMode::kPeriodic) {
      named_by_record(r, records, options, [&] { predict_periodic(platform, pt, options.periodic_bursts, options.zero_gap_loops); });
      pm_i.push_back(rel_error(pt.model_t_iss_s, r.t_iss_s));
      pm_p.push_back(rel_error(pt.model_t_period_s, r.t_period_s));
      ps_i.push_back(rel_error(pt.sim_t_iss_s, r.t_iss_s));
      ps_p.push_back(rel_error(pt.sim_t_period_s, r.t_period_s));
      if (pt.gap_sweep) {
        sm_i.push_back(pm_i.back());
        sm_p.push_back(pm_p.back());
        ss_i.push_back(ps_i.back());
        ss_p.push_back(ps_p.back());
      }
    } else {
      named_by_record(r, records, options, [&] { predict_isolated(platform, pt); });
      im.push_back(rel_error(pt.model_t_iss_s, r.t_iss_s));
      is.push_back(rel_error(pt.sim_t_iss_s, r.t_iss_s));
      if (r.volume_bytes() > platform.capacity_bytes(r.producers).value) {
        km.push_back(im.back());
        ks.push_back(is.back());
      }
    }
    rep.points.push_back(pt);
  }
  rep.periodic_model_t_iss = summarize(pm_i);
  rep.periodic_model_t_period = summarize(pm_p);
  rep.periodic_sim_t_iss = summarize(ps_i);
  rep.periodic_sim_t_period = summarize(ps_p);
  rep.sweep_model_t_iss = summarize(sm_i);
  rep.sweep_model_t_period = summarize(sm_p);
  rep.sweep_sim_t_iss = summarize(ss_i);
  rep.sweep_sim_t_period = summarize(ss_p);
  rep.isolated_model_t_iss = summarize(im);
  rep.isolated_sim_t_iss = summarize(is);
  rep.isolated_past_knee_model_t_iss = summarize(km);
  rep.isolated_past_knee_sim_t_iss = summarize(ks);

  // Local control: the plateau over G > 0 of the swept (K, B), and the zero-gap point against it.
  rep.local_drain_rate_bytes_per_s = platform.local_drain_rate_bytes_per_s;
  std::map<std::pair<int, double>, std::vector<double>> flat;
  for (const auto& r : rep.local_controls)
    if (r.mode == BurstMode::kPeriodic && r.gap_s > 0.0) flat[{r.producers, r.bytes_per_producer}].push_back(r.t_iss_s);
  for (const auto& [key, ts] : flat) {
    rep.local_flat_t_iss_s = stats::median(ts);
    for (const auto& r : rep.local_controls)
      if (r.mode == BurstMode::kPeriodic && r.gap_s <= 0.0 && r.producers == key.first && r.bytes_per_producer == key.second)
      {
        rep.local_zero_gap_ratio = std::max(rep.local_zero_gap_ratio, r.t_iss_s / rep.local_flat_t_iss_s);
        // Local memory's own drain: eq. 3 with the platform's local rate and the gap the model sees.
        if (platform.local_drain_rate_bytes_per_s > 0.0) {
          const double pred = model::issue_time_s(rep.local_flat_t_iss_s, r.volume_bytes(), platform.local_drain_rate_bytes_per_s,
                                                  model::probe_model_gap_s(platform, r, options.zero_gap_loops));
          rep.local_zero_gap_model_t_iss_s = pred;
          rep.local_zero_gap_model_rel_error = std::max(rep.local_zero_gap_model_rel_error, rel_error(pred, r.t_iss_s));
        }
      }
    break;  // the calibration sweeps one (K, B) over gaps
  }
  return rep;
}

ErrorSummary summarize_errors(const std::vector<double>& rel_errors) { return summarize(rel_errors); }

nlohmann::json to_json(const ErrorSummary& s) {
  return nlohmann::json{{"points", s.points}, {"median_rel_error", s.median_rel}, {"max_rel_error", s.max_rel}};
}

nlohmann::json to_json(const FidelityReport& rep) {
  using units::s_to_us;
  const double platform_local_gbps = units::bytes_per_s_to_gbps(rep.local_drain_rate_bytes_per_s);
  auto sum = [](const ErrorSummary& s) { return to_json(s); };
  nlohmann::json j = {
      {"schema", "xstage.fidelity/1"},
      {"summary",
       {{"periodic", {{"model_t_iss", sum(rep.periodic_model_t_iss)}, {"model_t_period", sum(rep.periodic_model_t_period)},
                      {"sim_t_iss", sum(rep.periodic_sim_t_iss)}, {"sim_t_period", sum(rep.periodic_sim_t_period)}}},
        {"gap_sweep", {{"model_t_iss", sum(rep.sweep_model_t_iss)}, {"model_t_period", sum(rep.sweep_model_t_period)},
                       {"sim_t_iss", sum(rep.sweep_sim_t_iss)}, {"sim_t_period", sum(rep.sweep_sim_t_period)}}},
        {"isolated", {{"model_t_iss", sum(rep.isolated_model_t_iss)}, {"sim_t_iss", sum(rep.isolated_sim_t_iss)},
                      {"past_knee_model_t_iss", sum(rep.isolated_past_knee_model_t_iss)},
                      {"past_knee_sim_t_iss", sum(rep.isolated_past_knee_sim_t_iss)}}},
        {"local_control", {{"flat_t_iss_us", s_to_us(rep.local_flat_t_iss_s)}, {"zero_gap_ratio", rep.local_zero_gap_ratio},
                           {"local_drain_rate_gbps", platform_local_gbps},
                           {"zero_gap_model_t_iss_us", s_to_us(rep.local_zero_gap_model_t_iss_s)},
                           {"zero_gap_model_rel_error", rep.local_zero_gap_model_rel_error},
                           {"note", "local memory's own drain, met with no gap: T_iss = max(plateau, V/R_local - G - h)"}}}}},
      {"points", nlohmann::json::array()},
      {"local_controls", nlohmann::json::array()}};
  for (const auto& p : rep.points) {
    const auto& r = p.record;
    nlohmann::json e = {{"mode", model::to_string(r.mode)}, {"producers", r.producers},
                        {"bytes_per_producer", r.bytes_per_producer}, {"gap_us", s_to_us(r.gap_s)},
                        {"gap_sweep", p.gap_sweep}, {"model_gap_us", s_to_us(p.model_gap_s)},
                        {"measured_t_iss_us", s_to_us(r.t_iss_s)},
                        {"model_t_iss_us", s_to_us(p.model_t_iss_s)}, {"sim_t_iss_us", s_to_us(p.sim_t_iss_s)},
                        {"model_t_iss_rel_error", (p.model_t_iss_s - r.t_iss_s) / r.t_iss_s},
                        {"sim_t_iss_rel_error", (p.sim_t_iss_s - r.t_iss_s) / r.t_iss_s}};
    if (r.mode == BurstMode::kPeriodic) {
      e["measured_t_period_us"] = s_to_us(r.t_period_s);
      e["model_t_period_us"] = s_to_us(p.model_t_period_s);
      e["sim_t_period_us"] = s_to_us(p.sim_t_period_s);
      e["model_t_period_rel_error"] = (p.model_t_period_s - r.t_period_s) / r.t_period_s;
      e["sim_t_period_rel_error"] = (p.sim_t_period_s - r.t_period_s) / r.t_period_s;
    }
    j["points"].push_back(e);
  }
  for (const auto& r : rep.local_controls) {
    nlohmann::json e = {{"mode", model::to_string(r.mode)}, {"producers", r.producers},
                        {"bytes_per_producer", r.bytes_per_producer}, {"gap_us", s_to_us(r.gap_s)},
                        {"measured_t_iss_us", s_to_us(r.t_iss_s)}};
    if (r.mode == BurstMode::kPeriodic) e["measured_t_period_us"] = s_to_us(r.t_period_s);
    j["local_controls"].push_back(e);
  }
  return j;
}

}  // namespace xstage::sim
