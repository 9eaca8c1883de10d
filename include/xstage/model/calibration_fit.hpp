// Calibration fit: raw records → platform parameters (the paper's §3, eq. 1, 5–7).
//  - R from zero-gap periodic remote records, T_period = V/R, on drain-dominated points only, by an
//    iteratively re-weighted least-squares slope through the origin with MAD outlier rejection;
//  - T_iss0(K,B) from the large-gap plateau of each periodic gap sweep (gap ≥ V/R, so the burst has
//    surely recovered), as a median;
//  - Q(K) from the knee of the isolated-burst issue time vs V: a two-segment fit
//    T = max(a + b·V, (V − Q)/R) with R fixed from the periodic fit; Q = V_knee − R·T_iss0 (eq. 6–7).
// Local-target records are controls: they enter no remote parameter; only local memory's own drain
// (local_drain_rate) is fitted from them.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "xstage/model/platform.hpp"
#include "xstage/model/records.hpp"

namespace xstage::model {

struct FitOptions {
  double outlier_mad_threshold = 3.5;  // points beyond this many scaled MADs are rejected
  int min_points_for_rate = 3;
  // The probe's zero-gap loop gaps (raw.json); without them a zero-gap record's gap is the fitted
  // zero_gap_overhead. They enter R(K) through the gap the model sees (probe_model_gap_s).
  std::vector<ZeroGapLoop> zero_gap_loops;
  // The simulator's isolated-burst prediction (sim::isolated_issue_time_s: K, B, floor, R_iso, Q, τ → slowest
  // producer's issue time). When set, each K's smooth-knee (Q, R_iso) is refined so that the largest
  // relative error of either predictor, the closed form or the simulator, over K's isolated records is
  // least: both then predict the records with one set of parameters (docs/model.md). Unset: the closed
  // form's fit alone.
  std::function<double(int, double, double, double, double, double)> isolated_simulator;
  // The physical bound of every fitted drain rate (R, R(K), the knees' R_iso): the link's rate per direction
  // (0: unbounded). A rate the records would put above it is held at the bound and reported in
  // FitResult::bounded as a misfit of the model, not absorbed by the parameter.
  double max_rate_bytes_per_s = 0.0;
};

// A fitted rate the records wanted above the physical bound: what they wanted, what was written, and the
// largest relative error of the records it governs at each.
struct BoundedRate {
  std::string parameter;  // "R", "R(33)", "R_iso(132)"
  double unbounded_bytes_per_s = 0.0;
  double written_bytes_per_s = 0.0;
  double max_rel_error_unbounded = 0.0;
  double max_rel_error_bounded = 0.0;
};

struct RateFit {
  double drain_rate_bytes_per_s = 0.0;
  int points_used = 0;
  int points_rejected = 0;
  double median_rel_residual = 0.0;  // |T_period − V/R| / T_period over the points used
  double max_rel_residual = 0.0;
};

struct FloorFit {
  int producers;
  double bytes_per_producer;
  double t_iss0_s;
  int points_used;
  double mad_s;  // spread of the plateau points
};

struct KneeFit {
  int producers;
  bool knee_found;        // false: no knee up to the largest V measured; capacity is a lower bound
  double knee_volume_bytes;  // first V on the drain-limited branch (or the largest V measured)
  double capacity_bytes;  // Q(K) (a lower bound when !knee_found)
  double floor_intercept_s;  // a of the backpressure-free branch a + b·V
  double floor_slope_s_per_byte;
  int points_below;
  int points_above;
  double median_rel_residual;
  // The smooth knee (burst_gap.hpp isolated_issue_time_ramped_s), fitted over every point of K with
  // the floor line above and the ramp τ shared by all K: capacity and aligned-burst drain rate.
  double ramped_capacity_bytes = 0.0;
  double ramped_drain_rate_bytes_per_s = 0.0;
  double ramped_median_rel_residual = 0.0;
  double ramped_max_rel_residual = 0.0;
  double simulated_median_rel_residual = 0.0;  // the simulator's, with the same (Q, R_iso, τ); 0: not run
  double simulated_max_rel_residual = 0.0;
};

// R(K) (docs/model.md, "Fidelity"): the rate of the period law at K. Started from the robust slope through
// the origin of K's drain-dominated zero-gap periods, then the rate within ±10 % of it that minimises the
// largest relative error of T_iss and T_period over every periodic remote record at K (eq. 3 and the period
// law with the gap G + h the model sees): a Chebyshev fit of the two quantities the model predicts.
struct RatePerProducers {
  int producers;
  RateFit fit;                       // the robust slope (fit.drain_rate_bytes_per_s: its rate)
  double bytes_per_s = 0.0;          // R(K) written to the platform (the minimax rate)
  int periodic_points = 0;           // periodic remote records at K in the minimax
  double max_rel_error = 0.0;        // their largest relative error of T_iss or T_period at R(K)
};

struct FitResult {
  RateFit rate;
  std::vector<FloorFit> floors;
  std::vector<KneeFit> knees;
  std::vector<RatePerProducers> rate_by_producers;  // R(K) from each K's drain-dominated zero-gap points
  double knee_ramp_s = 0.0;          // τ shared by the knees
  double burst_overhead_s = 0.0;     // h: median T_period − T_iss − G over recovered gap-sweep points
  double zero_gap_overhead_s = 0.0;  // h at G = 0: median T_period − T_iss over floor-dominated zero-gap points
  // Local memory's own drain, from the local control's zero-gap records that its drain binds (T_iss above
  // 1.1 × the per-SM issue floor at their B: the smallest K's local T_iss there); 0 with fewer than 2.
  RateFit local_rate;
  std::vector<BoundedRate> bounded;  // misfits: rates held at FitOptions::max_rate_bytes_per_s
  std::vector<std::string> warnings;
  Platform platform;  // ready to write: drain rate, issue floors, capacities (knees found only)
};

// The gap a probe record's producers spent, as the model sees it: the recorded gap plus the platform's
// per-burst bookkeeping h; a zero-gap record takes its measured loop gap from `loops` (+ h) where given,
// else the platform's zero-gap overhead. One rule for the fit and the fidelity report.
double probe_model_gap_s(const Platform& p, const CalibrationRecord& r, const std::vector<ZeroGapLoop>& loops);

// Throws xstage::InputError when the records cannot determine R (too few zero-gap periodic remote points).
FitResult fit_platform(const std::vector<CalibrationRecord>& records, const FitOptions& options = {});

}  // namespace xstage::model
