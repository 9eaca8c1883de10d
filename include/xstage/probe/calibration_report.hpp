// Calibration outputs (pure C++, src/probe/calibration_report.cpp in xstage_probe_plan; the CLI and the CPU tests
// run the same code):
//  - report.json: copy-engine reference, the fitted parameters, and for every measured point the
//    model's prediction from those parameters (fitted once, burst_gap.hpp formulas) vs the
//    measurement, with median and max relative errors per sweep phase, the local control's flatness,
//    the knee statement per K, the store-path cross-check, and the acceptance checks;
//  - safe output files: an existing output's files are never overwritten without --force, and every
//    file is written under a temporary name and renamed, so an error leaves no half-written file.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "xstage/model/calibration_fit.hpp"
#include "xstage/model/error.hpp"
#include "xstage/model/records.hpp"
#include "xstage/probe/sweep_plan.hpp"

namespace xstage::probe {

inline constexpr const char* kReportSchema = "xstage.calibration_report/1";

struct LabeledRecord {
  model::CalibrationRecord record;
  SweepPhase phase = SweepPhase::kZeroGap;
  bool mma_gap = false;
};

// Run-time outcome of the isolated V sweep for one producer count.
struct KneeSearch {
  int producers = 0;
  std::uint64_t largest_volume_bytes = 0;
  std::string stopped_because;  // "knee found", "buffer limit reached", "time budget reached"
};

struct ReportInputs {
  std::vector<LabeledRecord> points;      // every measured point (path-check points included)
  model::FitResult fit;                   // fitted once on the records.csv points
  bool fit_is_local_control = false;      // no remote data: the fit ran on local records relabelled
  std::optional<double> path_check_rate_bytes_per_s;  // R fitted from the other store path's points
  std::optional<double> path_check_main_rate_bytes_per_s;  // R of the main path from the same (K, B) points
  std::string main_path, other_path;
  nlohmann::json copy_engine = nlohmann::json::array();
  std::optional<double> copy_engine_peer_gbps;
  std::vector<KneeSearch> knee_searches;
  nlohmann::json provenance = nlohmann::json::object();
  std::vector<std::string> notes;
};

// Records that go to records.csv and into the fit: everything but the MMA-gap and path-check points
// (those are checked against the same fitted parameters, not fitted).
std::vector<model::CalibrationRecord> fit_records(const std::vector<LabeledRecord>& pts);

// With one GPU there is no remote record; the fit runs on the local control, relabelled, so the fitting
// and reporting chain is exercised. The result describes local stores, never a remote platform.
std::vector<model::CalibrationRecord> relabel_local_as_fit_input(std::vector<model::CalibrationRecord> rs);

// report.json (schema kReportSchema): the fitted parameters, every point's prediction vs measurement, the
// per-phase error summaries, the local control, the store-path check and the acceptance checks.
nlohmann::json build_calibration_report(const ReportInputs& in);

// ----- output files -----------------------------------------------------------------------------

// Creates `dir` if needed. Throws InputError naming --out and the file if any of `names` already
// exists there and `force` is false.
void prepare_output_dir(const std::string& dir, bool force, const std::vector<std::string>& names);

// records.csv's text (model::write_records_csv).
std::string records_csv_text(const std::vector<model::CalibrationRecord>& rs);

}  // namespace xstage::probe
