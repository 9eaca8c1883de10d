// The calibration report's local control on the committed H200-pair calibration
// (results/h200-x2/calibration/raw.json): local memory's own drain explains the zero-gap point, and
// the check still fails where the model is wrong.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "xstage/model/calibration_fit.hpp"
#include "xstage/probe/calibration_report.hpp"

namespace {

using namespace xstage;
using probe::LabeledRecord;
using probe::SweepPhase;

std::string src(const std::string& rel) { return std::string(XSTAGE_SOURCE_DIR) + "/" + rel; }
const std::string kRaw = "results/h200-x2/calibration/raw.json";

// Every measured point of raw.json with its phase, as calibrate labels it (a programmed zero gap is G = 0).
std::vector<LabeledRecord> committed_points() {
  std::ifstream in(src(kRaw));
  const auto j = nlohmann::json::parse(in);
  std::vector<LabeledRecord> out;
  for (const auto& p : j["points"]) {
    LabeledRecord lr;
    const std::string phase = p["phase"];
    lr.phase = phase == "zero-gap"       ? SweepPhase::kZeroGap
               : phase == "gap-sweep"     ? SweepPhase::kGapSweep
               : phase == "gap-sweep-mma" ? SweepPhase::kGapSweepMma
               : phase == "isolated"      ? SweepPhase::kIsolated
                                          : SweepPhase::kPathCheck;
    lr.mma_gap = lr.phase == SweepPhase::kGapSweepMma;
    const bool periodic = p["mode"] == "periodic";
    auto& r = lr.record;
    r.mode = periodic ? model::BurstMode::kPeriodic : model::BurstMode::kIsolated;
    r.target = p["target"] == "local" ? model::StoreTarget::kLocal : model::StoreTarget::kRemote;
    r.producers = p["producers"];
    r.bytes_per_producer = p["bytes_per_producer"];
    r.gap_s = periodic && p["gap_requested_us"].get<double>() > 0 ? p["gap_us"].get<double>() * 1e-6 : 0.0;
    r.t_iss_s = p["t_iss_us"].get<double>() * 1e-6;
    r.t_period_s = periodic ? p["t_period_us"].get<double>() * 1e-6 : std::nan("");
    out.push_back(lr);
  }
  return out;
}

nlohmann::json report_of(const std::vector<LabeledRecord>& pts) {
  probe::ReportInputs in;
  in.points = pts;
  model::FitOptions fo;
  fo.zero_gap_loops = model::load_zero_gap_loops(src(kRaw));
  in.fit = model::fit_platform(probe::fit_records(pts), fo);
  return probe::build_calibration_report(in);
}

const nlohmann::json& check_named(const nlohmann::json& rep, const std::string& name) {
  for (const auto& c : rep["checks"])
    if (c["name"] == name) return c;
  static const nlohmann::json none;
  ADD_FAILURE() << "no check " << name;
  return none;
}

}  // namespace

TEST(CalibrationLocalControl, LocalDrainExplainsTheZeroGapPoint) {
  const auto rep = report_of(committed_points());
  // Fitted from the local zero-gap records at K = 132, B >= 32 KiB: about 4.5 TB/s (HBM).
  const double r_local = rep["summary"]["local_control_model"]["local_drain_rate_gbps"].get<double>();
  EXPECT_NEAR(r_local, 4514.0, 50.0);
  EXPECT_GE(rep["summary"]["local_control_model"]["local_drain_points"].get<int>(), 3);
  // The zero-gap point sits 22 % above the plateau; the model with the local drain is within 1 %.
  EXPECT_NEAR(rep["summary"]["local_control_t_iss_flatness"]["max_rel_deviation_from_median"].get<double>(), 0.22, 0.02);
  const auto& c = check_named(rep, "local_control_t_iss_vs_local_drain_model");
  EXPECT_TRUE(c["applicable"].get<bool>());
  EXPECT_TRUE(c["pass"].get<bool>()) << c.dump();
  EXPECT_LT(c["value"].get<double>(), 0.01) << c.dump();
  EXPECT_TRUE(check_named(rep, "local_control_t_iss_flat_in_gap_above_zero")["pass"].get<bool>());
}

TEST(CalibrationLocalControl, CheckFailsWhereTheModelIsWrong) {
  // A local zero-gap point 30 % slower than its local drain allows, or a local point at G > 0 above the
  // plateau: the model does not explain either, and the check fails.
  auto pts = committed_points();
  for (auto& p : pts)
    if (p.phase == SweepPhase::kGapSweep && p.record.target == model::StoreTarget::kLocal && p.record.gap_s == 0.0)
      p.record.t_iss_s *= 1.3;
  EXPECT_FALSE(check_named(report_of(pts), "local_control_t_iss_vs_local_drain_model")["pass"].get<bool>());
  pts = committed_points();
  for (auto& p : pts)
    if (p.phase == SweepPhase::kGapSweep && p.record.target == model::StoreTarget::kLocal && p.record.gap_s > 10e-6 &&
        p.record.gap_s < 11e-6)
      p.record.t_iss_s *= 1.15;
  EXPECT_FALSE(check_named(report_of(pts), "local_control_t_iss_vs_local_drain_model")["pass"].get<bool>());
}

TEST(CalibrationLocalControl, WithoutLocalZeroGapRecordsTheCheckIsFlatness) {
  // No local zero-gap records: no local drain is fitted, the prediction is the plateau, and the G = 0
  // point of the sweep (22 % high) fails, as the flatness check did.
  auto pts = committed_points();
  std::vector<LabeledRecord> kept;
  for (const auto& p : pts)
    if (!(p.phase == SweepPhase::kZeroGap && p.record.target == model::StoreTarget::kLocal)) kept.push_back(p);
  // The sweep's own G = 0 point is one record: too few to fit a drain (>= 2 drain-bound points).
  const auto rep = report_of(kept);
  EXPECT_TRUE(rep["summary"]["local_control_model"]["local_drain_rate_gbps"].is_null());
  const auto& c = check_named(rep, "local_control_t_iss_vs_local_drain_model");
  EXPECT_FALSE(c["pass"].get<bool>());
  EXPECT_NEAR(c["value"].get<double>(), 0.18, 0.02);  // |0.547 - 0.669| / 0.669
}
