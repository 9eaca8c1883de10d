// Cross-validation of the platform fit (`xstage fit --cross-validate`): the records are split, the platform is
// fitted on one part (model::fit_platform) and every record of the other part is predicted by the closed form
// and the simulator (fidelity_report), so that each remote record is predicted once by a fit that never saw
// it. Schemes:
//   k-fold          records of each series (mode, K, B) dealt in turn to k folds (alternate records at k = 2);
//   producers       leave one producer count K out (all its periodic and isolated records);
//   burst size      leave one bytes-per-producer B out (every record at that B, every K and mode);
//   gap sweep       leave one gap sweep out (the periodic records of one (K, B) swept over gaps, its zero-gap
//                   point included).
// Local-target records are controls and stay in every training set. A fold whose training records cannot
// be fitted (too few points left) is listed with the reason and its records count as not predicted.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "xstage/model/calibration_fit.hpp"
#include "xstage/model/records.hpp"
#include "xstage/sim/fidelity.hpp"

namespace xstage::sim {

// Errors of one predictor family over a set of records: periodic T_iss and T_period, isolated T_iss;
// closed form and simulator.
struct CvErrors {
  ErrorSummary periodic_model_t_iss, periodic_model_t_period, periodic_sim_t_iss, periodic_sim_t_period;
  ErrorSummary isolated_model_t_iss, isolated_sim_t_iss;
};

// One held-out prediction: the record, the fold that held it out, and its relative errors.
struct CvPoint {
  model::CalibrationRecord record;
  std::string fold;
  double model_t_iss_rel = 0.0, model_t_period_rel = 0.0;  // period: periodic only
  double sim_t_iss_rel = 0.0, sim_t_period_rel = 0.0;
};

struct CvFailedFold {
  std::string fold;
  int records = 0;
  std::string reason;
};

struct CvScheme {
  std::string name;  // "2-fold", "leave one K out", ...
  int folds = 0;
  CvErrors held_out;
  std::vector<CvPoint> points;  // every held-out prediction
  std::vector<CvFailedFold> failed;
  // The largest rates any fold wrote (R(K), R_iso), to show the bound held in every fold.
  double max_fitted_rate_bytes_per_s = 0.0;
};

struct CrossValidation {
  CvErrors in_sample;  // the fit on every record, scored on the same records
  std::vector<CvScheme> schemes;
  double max_rate_bytes_per_s = 0.0;  // the bound the fits ran under (0: none)
};

struct CvOptions {
  int k = 2;                        // folds of the k-fold scheme (2..10)
  model::FitOptions fit;            // as `xstage fit` runs it (bound, zero-gap loops, simulator)
  FidelityOptions fidelity;         // as `xstage fidelity` runs it
};

// Throws InputError when k is out of range or the full fit fails.
CrossValidation cross_validate(const std::vector<model::CalibrationRecord>& records, const CvOptions& options);
nlohmann::json to_json(const CrossValidation& cv);

}  // namespace xstage::sim
