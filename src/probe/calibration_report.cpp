// Calibration outputs (include/xstage/probe/calibration_report.hpp): report.json and the safe output files.
// Pure C++: the CLI and the CPU tests run the same code.
#include "xstage/probe/calibration_report.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "xstage/model/burst_gap.hpp"
#include "xstage/model/platform.hpp"
#include "xstage/model/stats.hpp"

namespace xstage::probe {

std::vector<model::CalibrationRecord> fit_records(const std::vector<LabeledRecord>& pts) {
  std::vector<model::CalibrationRecord> out;
  for (const auto& p : pts)
    if (p.phase != SweepPhase::kGapSweepMma && p.phase != SweepPhase::kPathCheck) out.push_back(p.record);
  return out;
}

std::vector<model::CalibrationRecord> relabel_local_as_fit_input(std::vector<model::CalibrationRecord> rs) {
  for (auto& r : rs) r.target = model::StoreTarget::kRemote;
  return rs;
}

namespace {

nlohmann::json num(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }

double rel_err(double pred, double meas) { return std::abs(pred - meas) / meas; }

struct ErrAcc {
  std::vector<double> errs;
  void add(double pred, double meas) {
    if (std::isfinite(pred) && std::isfinite(meas) && meas > 0) errs.push_back(rel_err(pred, meas));
  }
  nlohmann::json json() const {
    if (errs.empty()) return {{"points", 0}, {"median_rel_error", nullptr}, {"max_rel_error", nullptr}};
    return {{"points", errs.size()},
            {"median_rel_error", stats::median(errs)},
            {"max_rel_error", *std::max_element(errs.begin(), errs.end())}};
  }
  std::optional<double> median() const {
    if (errs.empty()) return std::nullopt;
    return stats::median(errs);
  }
};

nlohmann::json check(const std::string& name, std::optional<double> value, double lo, double hi,
                     const std::string& what) {
  nlohmann::json c{{"name", name}, {"requirement", what}};
  if (!value) {
    c["applicable"] = false;
    c["pass"] = nullptr;
    c["value"] = nullptr;
  } else {
    c["applicable"] = true;
    c["value"] = *value;
    c["pass"] = *value >= lo && *value <= hi;
  }
  return c;
}

}  // namespace

nlohmann::json build_calibration_report(const ReportInputs& in) {
  using model::BurstMode;
  using model::StoreTarget;
  const model::Platform& pf = in.fit.platform;
  const double rate = pf.drain_rate_bytes_per_s;
  const auto fitted_target = in.fit_is_local_control ? StoreTarget::kLocal : StoreTarget::kRemote;

  nlohmann::json j;
  j["schema"] = kReportSchema;
  j["provenance"] = in.provenance;
  j["fit_is_local_control"] = in.fit_is_local_control;
  if (in.fit_is_local_control)
    j["fit_note"] = "No remote measurement was possible (fewer than 2 GPUs). The fit below ran on the local-target "
                    "control records, relabelled; it describes stores to the GPU's own memory, not a remote platform.";
  j["copy_engine"] = in.copy_engine;
  j["copy_engine_peer_gbps"] = in.copy_engine_peer_gbps ? nlohmann::json(*in.copy_engine_peer_gbps) : nlohmann::json(nullptr);

  // Fitted parameters.
  nlohmann::json fitted;
  fitted["drain_rate_gbps"] = rate / 1e9;
  fitted["rate_fit"] = {{"points_used", in.fit.rate.points_used},
                        {"points_rejected", in.fit.rate.points_rejected},
                        {"median_rel_residual", in.fit.rate.median_rel_residual},
                        {"max_rel_residual", in.fit.rate.max_rel_residual}};
  std::optional<double> r_over_ce;
  if (in.copy_engine_peer_gbps && !in.fit_is_local_control) {
    r_over_ce = rate / 1e9 / *in.copy_engine_peer_gbps;
    fitted["drain_rate_over_copy_engine"] = *r_over_ce;
  }
  nlohmann::json floors = nlohmann::json::array();
  for (const auto& f : in.fit.floors)
    floors.push_back({{"producers", f.producers}, {"bytes_per_producer", f.bytes_per_producer},
                      {"t_iss0_us", f.t_iss0_s * 1e6}, {"points_used", f.points_used}, {"mad_us", f.mad_s * 1e6}});
  fitted["issue_floor"] = floors;
  nlohmann::json knees = nlohmann::json::array();
  int knees_stated = 0;
  for (const auto& k : in.fit.knees) {
    nlohmann::json o{{"producers", k.producers},
                     {"knee_found", k.knee_found},
                     {"knee_volume_bytes", k.knee_volume_bytes},
                     {"capacity_bytes", k.capacity_bytes},
                     {"capacity_is_lower_bound", !k.knee_found},
                     {"points_below", k.points_below},
                     {"points_above", k.points_above},
                     {"median_rel_residual", num(k.median_rel_residual)}};
    for (const auto& s : in.knee_searches)
      if (s.producers == k.producers) {
        o["search_largest_volume_bytes"] = s.largest_volume_bytes;
        o["search_stopped_because"] = s.stopped_because;
      }
    o["statement"] = k.knee_found
                         ? "knee at V = " + std::to_string(k.knee_volume_bytes) + " B: Q(" + std::to_string(k.producers) +
                               ") = " + std::to_string(k.capacity_bytes) + " B"
                         : "no knee up to V = " + std::to_string(k.knee_volume_bytes) + " B: Q(" +
                               std::to_string(k.producers) + ") >= " + std::to_string(k.capacity_bytes) + " B";
    ++knees_stated;
    knees.push_back(o);
  }
  fitted["knees"] = knees;
  fitted["warnings"] = in.fit.warnings;
  j["fitted"] = fitted;

  // Every point: prediction from the fitted parameters vs measurement.
  ErrAcc zero_period, gap_iss, gap_period, mma_iss, mma_period, iso_iss;
  nlohmann::json pts = nlohmann::json::array();
  std::vector<double> local_gap_iss, local_gap_iss_pos;
  for (const auto& lp : in.points) {
    const auto& r = lp.record;
    const double v = r.volume_bytes();
    nlohmann::json o{{"phase", to_string(lp.phase)},
                     {"mode", model::to_string(r.mode)},
                     {"target", model::to_string(r.target)},
                     {"gap_kind", lp.mma_gap ? "mma" : "spin"},
                     {"producers", r.producers},
                     {"bytes_per_producer", r.bytes_per_producer},
                     {"volume_bytes", v},
                     {"gap_us", r.gap_s * 1e6},
                     {"t_iss_us", num(r.t_iss_s * 1e6)},
                     {"t_period_us", num(r.t_period_s * 1e6)}};
    if (lp.phase == SweepPhase::kGapSweep && r.target == StoreTarget::kLocal) {
      local_gap_iss.push_back(r.t_iss_s);
      if (r.gap_s > 0) local_gap_iss_pos.push_back(r.t_iss_s);
    }
    const bool predicted = r.target == fitted_target && rate > 0 && !pf.issue_floor.empty() &&
                           lp.phase != SweepPhase::kPathCheck;
    if (predicted) {
      const auto floor = pf.issue_floor_s(r.producers, r.bytes_per_producer);
      o["t_iss0_us"] = floor.value * 1e6;
      o["t_iss0_source"] = model::to_string(floor.source);
      if (r.mode == BurstMode::kPeriodic) {
        const double p_iss = model::issue_time_s(floor.value, v, rate, r.gap_s);
        const double p_per = model::period_s(floor.value, v, rate, r.gap_s);
        o["pred_t_iss_us"] = p_iss * 1e6;
        o["pred_t_period_us"] = p_per * 1e6;
        o["pred_t_period_completion_coupled_us"] = model::completion_coupled_period_s(v, rate, r.gap_s) * 1e6;
        o["pred_drain_time_us"] = model::drain_time_s(v, rate) * 1e6;
        o["rel_err_t_iss"] = num(rel_err(p_iss, r.t_iss_s));
        o["rel_err_t_period"] = num(rel_err(p_per, r.t_period_s));
        if (lp.phase == SweepPhase::kZeroGap) zero_period.add(p_per, r.t_period_s);
        if (lp.phase == SweepPhase::kGapSweep) {
          gap_iss.add(p_iss, r.t_iss_s);
          gap_period.add(p_per, r.t_period_s);
        }
        if (lp.phase == SweepPhase::kGapSweepMma) {
          mma_iss.add(p_iss, r.t_iss_s);
          mma_period.add(p_per, r.t_period_s);
        }
      } else {
        const auto cap = pf.capacity_bytes(r.producers);
        const bool has_cap = !pf.capacity.empty();
        const double q = has_cap ? cap.value : std::numeric_limits<double>::infinity();
        const double p_iss = model::isolated_issue_time_s(floor.value, v, rate, q);
        o["capacity_bytes"] = has_cap ? nlohmann::json(q) : nlohmann::json(nullptr);
        o["pred_t_iss_us"] = p_iss * 1e6;
        o["rel_err_t_iss"] = num(rel_err(p_iss, r.t_iss_s));
        iso_iss.add(p_iss, r.t_iss_s);
      }
    }
    pts.push_back(o);
  }
  j["points"] = pts;

  nlohmann::json summary;
  summary["zero_gap_t_period"] = zero_period.json();
  summary["gap_sweep_t_iss"] = gap_iss.json();
  summary["gap_sweep_t_period"] = gap_period.json();
  summary["gap_sweep_mma_t_iss"] = mma_iss.json();
  summary["gap_sweep_mma_t_period"] = mma_period.json();
  summary["isolated_t_iss"] = iso_iss.json();
  // The local control's issue time across the gap sweep: over every gap, and over the gaps > 0 (at
  // G = 0 local stores can meet their own, much faster, drain limit: local memory has an X-Stage too).
  std::optional<double> local_flat, local_flat_pos;
  auto flatness = [](const std::vector<double>& xs) {
    const double med = stats::median(xs);
    double dev = 0;
    for (double x : xs) dev = std::max(dev, std::abs(x - med) / med);
    return std::pair<double, double>{med, dev};
  };
  if (local_gap_iss.size() >= 2) {
    const auto [med, dev] = flatness(local_gap_iss);
    local_flat = dev;
    nlohmann::json fl{{"points", local_gap_iss.size()}, {"median_t_iss_us", med * 1e6}, {"max_rel_deviation_from_median", dev}};
    if (local_gap_iss_pos.size() >= 2) {
      const auto [med2, dev2] = flatness(local_gap_iss_pos);
      local_flat_pos = dev2;
      fl["gap_above_zero"] = {{"points", local_gap_iss_pos.size()},
                              {"median_t_iss_us", med2 * 1e6},
                              {"max_rel_deviation_from_median", dev2}};
    }
    summary["local_control_t_iss_flatness"] = fl;
  }
  // The local control against the model of local memory: T_iss = max(T0_local, V/R_local − G_model), T0_local
  // the plateau over G > 0, R_local the fitted local drain (back-to-back local bursts meet it at G = 0), the
  // gap the model sees (G + h; at G = 0 the zero-gap overhead). Without a fitted local drain the prediction
  // is the plateau itself, so the check is then the flatness of every gap.
  std::optional<double> local_model_err;
  if (!local_gap_iss_pos.empty()) {
    const double t0_local = stats::median(local_gap_iss_pos);
    double worst = 0.0;
    nlohmann::json lp = nlohmann::json::array();
    for (const auto& lp_in : in.points) {
      const auto& r = lp_in.record;
      if (lp_in.phase != SweepPhase::kGapSweep || r.target != StoreTarget::kLocal) continue;
      const double g = model::probe_model_gap_s(pf, r, {});
      const double pred = pf.local_drain_rate_bytes_per_s > 0.0
                              ? model::issue_time_s(t0_local, r.volume_bytes(), pf.local_drain_rate_bytes_per_s, g)
                              : t0_local;
      worst = std::max(worst, rel_err(pred, r.t_iss_s));
      lp.push_back({{"gap_us", r.gap_s * 1e6}, {"t_iss_us", num(r.t_iss_s * 1e6)}, {"pred_t_iss_us", pred * 1e6}});
    }
    local_model_err = worst;
    summary["local_control_model"] = {
        {"t_iss0_local_us", t0_local * 1e6},
        {"local_drain_rate_gbps", pf.local_drain_rate_bytes_per_s > 0.0 ? nlohmann::json(pf.local_drain_rate_bytes_per_s / 1e9)
                                                                         : nlohmann::json(nullptr)},
        {"local_drain_points", in.fit.local_rate.points_used},
        {"max_rel_error_t_iss", worst},
        {"points", lp}};
  }
  std::optional<double> path_diff;
  if (in.path_check_rate_bytes_per_s && rate > 0) {
    const double main_rate = in.path_check_main_rate_bytes_per_s.value_or(rate);
    path_diff = std::abs(*in.path_check_rate_bytes_per_s / main_rate - 1.0);
    summary["store_path_check"] = {{"main_path", in.main_path},
                                   {"main_drain_rate_gbps_same_points", main_rate / 1e9},
                                   {"main_drain_rate_gbps_all_points", rate / 1e9},
                                   {"other_path", in.other_path},
                                   {"other_drain_rate_gbps", *in.path_check_rate_bytes_per_s / 1e9},
                                   {"rel_difference", *path_diff}};
  }
  j["summary"] = summary;

  const bool remote = !in.fit_is_local_control;
  nlohmann::json checks = nlohmann::json::array();
  checks.push_back(check("drain_rate_vs_copy_engine", remote ? r_over_ce : std::nullopt, 0.85, 1.05,
                         "0.85 <= R / copy-engine peer bandwidth <= 1.05"));
  checks.push_back(check("gap_sweep_t_iss_median_rel_error", gap_iss.median(), 0.0, 0.10, "<= 10 %"));
  checks.push_back(check("gap_sweep_t_period_median_rel_error", gap_period.median(), 0.0, 0.05, "<= 5 %"));
  checks.push_back(check("local_control_t_iss_vs_local_drain_model", local_model_err, 0.0, 0.10,
                         "every gap of the local sweep within 10 % of max(T0_local, V/R_local - G - h); at G = 0 local "
                         "memory's own drain binds"));
  checks.push_back(check("local_control_t_iss_flat_in_gap_above_zero", local_flat_pos, 0.0, 0.10,
                         "max deviation from median <= 10 %, gaps > 0"));
  checks.push_back(check("knee_stated_for_producer_counts", static_cast<double>(knees_stated), 3.0, 1e9, ">= 3 K"));
  checks.push_back(check("store_paths_agree_on_drain_rate", path_diff, 0.0, 0.05, "|R_other / R - 1| <= 5 %"));
  if (!remote)
    for (auto& c : checks) c["note"] = "fit on the local control: not a statement about remote stores";
  j["checks"] = checks;
  j["notes"] = in.notes;
  return j;
}

// ----- output files -----------------------------------------------------------------------------

void prepare_output_dir(const std::string& dir, bool force, const std::vector<std::string>& names) {
  namespace fs = std::filesystem;
  if (dir.empty()) throw InputError("--out: empty path");
  if (fs::exists(dir) && !fs::is_directory(dir)) throw InputError("--out " + dir + ": exists and is not a directory");
  if (!force)
    for (const auto& n : names)
      if (fs::exists(fs::path(dir) / n))
        throw InputError("--out " + dir + ": " + n + " already exists (pass --force to overwrite)");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw InputError("--out " + dir + ": cannot create directory: " + ec.message());
}

std::string records_csv_text(const std::vector<model::CalibrationRecord>& rs) {
  std::ostringstream os;
  model::write_records_csv(os, rs);
  return os.str();
}

}  // namespace xstage::probe
