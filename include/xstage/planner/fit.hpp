// `xstage fit` and `xstage fidelity` as planner functions: a request (the command's arguments by their snake_case
// names), its checks, and the result with the JSON the CLI prints with --json, from which the CLI prints its
// tables. The files these commands write (fit's platform file, fidelity's --out report) stay the CLI's: the
// functions return the platform and the report, the CLI writes them. The C ABI (planner_c_api.h), the Python
// planner and the CLI call these.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "xstage/model/calibration_fit.hpp"
#include "xstage/model/platform.hpp"
#include "xstage/model/records.hpp"
#include "xstage/sim/cross_validation.hpp"
#include "xstage/sim/fidelity.hpp"

namespace xstage::planner {

// ---- fit: calibration records (CSV) -> a platform (R, T_iss0, Q) -------------------------------------------------
// The CLI's --out and --force (the platform file) are not part of a request.
struct FitRequest {
  std::string records;         // xstage calibrate's records.csv (required)
  std::string raw;             // "" or raw.json of the same calibration: the zero-gap records' measured loop gaps
  std::string name = "fitted";  // the platform's name
  // physical_bounds written into the platform; the fit runs under the link's rate (0: unbounded).
  double link_gbps = 0.0;
  std::string link_source;
  double copy_engine_gbps = 0.0;
  int sms = 0;
};
// Reads a request, each value checked with the rule of the CLI's flag of the same name, in the order of the CLI's
// options. Throws RequestError naming the argument.
FitRequest fit_request(const nlohmann::json& request);
// The checks the CLI makes before it checks its output file: the name (not empty, printable UTF-8 of at most 120
// bytes). Throws InputError naming the argument (`flag_names`: the CLI's flags, --name, instead of the keys).
void check_fit(const FitRequest& r, bool flag_names = false);

struct FitResult {
  std::vector<model::CalibrationRecord> records;
  model::FitResult fit;
  nlohmann::json platform;  // the fitted xstage.platform/1 document (what the CLI writes to --out)
  // xstage.fit/1 (`out`: null; the CLI's --json sets it to its --out), with the fitted document under `platform`
  // where `with_platform` (the C ABI's answer; the CLI's --json has none).
  nlohmann::json json;
};
// Loads the records (and raw loop gaps), checks the bounds' arguments (link_source, copy_engine_gbps and sms only
// with link_gbps, link_source required with it), fits, and checks that the platform loads with the tool's own
// loader (its messages name `platform_origin`: the CLI's --out file). The request checked by check_fit before.
FitResult fit(const FitRequest& r, bool flag_names = false, const std::string& platform_origin = "fitted platform",
              bool with_platform = true);
inline nlohmann::json fit_output(const nlohmann::json& request) {
  const FitRequest r = fit_request(request);
  check_fit(r);
  return fit(r).json;
}

// ---- fidelity: every calibration record predicted (closed form, simulator) against its measurement -------------
// The CLI's --out and --force (a copy of the report) are not part of a request.
struct FidelityRequest {
  std::string platform;  // empty: the embedded platform
  std::string records;   // required
  std::string raw;
  std::vector<std::string> traces;  // traced MoE bench files: eq. 15 per tile
  std::string ulysses;              // a Ulysses sweep file: predicted vs measured residual
  bool cross_validate = false;
  std::optional<int> folds;  // with cross_validate: folds of the k-fold scheme (default 2)

  // The files the command reads, in the order the report's provenance lists them.
  std::vector<std::string> inputs() const;
};
// Reads a request, each value checked with the rule of the CLI's flag of the same name, in the order of the CLI's
// options. Throws RequestError naming the argument.
FidelityRequest fidelity_request(const nlohmann::json& request);
// The CLI's check after its options': folds only with cross_validate. Throws InputError naming the arguments.
void check_fidelity(const FidelityRequest& r, bool flag_names = false);

struct FidelityResult {
  model::Platform platform;
  sim::FidelityReport report;
  std::vector<sim::TileStallRow> stalls;  // of the traces
  std::vector<sim::GemmRateFit> gemm;     // their per-SM GEMM rates
  std::vector<sim::UlyssesRow> ulysses;
  std::optional<sim::CrossValidation> cross_validation;
  // xstage.fidelity/1; its provenance holds the version and the files read (the CLI replaces it with its own,
  // which adds the command line and the build's git revision).
  nlohmann::json json;
};
// The report (the request checked by check_fidelity before).
FidelityResult fidelity(const FidelityRequest& r);
inline nlohmann::json fidelity_output(const nlohmann::json& request) {
  const FidelityRequest r = fidelity_request(request);
  check_fidelity(r);
  return fidelity(r).json;
}

}  // namespace xstage::planner
