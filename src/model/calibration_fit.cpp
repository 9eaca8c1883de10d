#include "xstage/model/calibration_fit.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "xstage/model/burst_gap.hpp"
#include "xstage/model/error.hpp"
#include "xstage/model/stats.hpp"
#include "xstage/model/units.hpp"

namespace xstage::model {

namespace {

constexpr double kMadToSigma = 1.4826;  // MAD of a normal sample → standard deviation

bool is_zero_gap(const CalibrationRecord& r) { return r.gap_s <= 1e-12; }

// V/T ratios of zero-gap periodic points: drain-dominated points sit at R, floor-dominated ones
// below it, so the median of the upper half is a robust starting rate.
double initial_rate(const std::vector<const CalibrationRecord*>& zero_gap) {
  std::vector<double> ratios;
  for (const auto* r : zero_gap) ratios.push_back(r->volume_bytes() / r->t_period_s);
  std::sort(ratios.begin(), ratios.end());
  const std::vector<double> upper(ratios.begin() + static_cast<std::ptrdiff_t>(ratios.size() / 2), ratios.end());
  return stats::median(upper);
}

// T_iss0 per (K, B): median issue time over the recovered part of each periodic gap sweep.
std::vector<FloorFit> fit_floors(const std::vector<CalibrationRecord>& records, double rate,
                                 std::vector<std::string>* warnings) {
  std::map<std::pair<int, double>, std::vector<const CalibrationRecord*>> sweeps;
  for (const auto& r : records)
    if (r.mode == BurstMode::kPeriodic && r.target == StoreTarget::kRemote && !is_zero_gap(r))
      sweeps[{r.producers, r.bytes_per_producer}].push_back(&r);
  std::vector<FloorFit> floors;
  for (auto& [key, pts] : sweeps) {
    const double v = static_cast<double>(key.first) * key.second;
    std::vector<double> plateau;
    for (const auto* r : pts)
      if (r->gap_s >= drain_time_s(v, rate)) plateau.push_back(r->t_iss_s);  // G ≥ V/R ≥ G*: recovered
    if (plateau.empty()) {
      // No gap reached V/R: fall back to the largest quarter of the gaps, and say so.
      std::sort(pts.begin(), pts.end(), [](auto* a, auto* b) { return a->gap_s < b->gap_s; });
      const std::size_t from = pts.size() - std::max<std::size_t>(1, pts.size() / 4);
      for (std::size_t i = from; i < pts.size(); ++i) plateau.push_back(pts[i]->t_iss_s);
      if (warnings)
        warnings->push_back("K=" + std::to_string(key.first) + " B=" + std::to_string(static_cast<long long>(key.second)) +
                            ": no gap reached V/R; T_iss0 taken from the largest gaps (may be high)");
    }
    floors.push_back({key.first, key.second, stats::median(plateau), static_cast<int>(plateau.size()),
                      stats::median_abs_deviation(plateau)});
  }
  return floors;
}

Platform floors_only_platform(const std::vector<FloorFit>& floors, double rate) {
  Platform p;
  p.name = "fit";
  p.drain_rate_bytes_per_s = rate;
  for (const auto& f : floors) p.issue_floor.push_back({f.producers, f.bytes_per_producer, f.t_iss0_s});
  return p;
}

// Slope through the origin T = V·s (s = 1/R), minimising relative residuals, with MAD rejection.
RateFit fit_rate(const std::vector<const CalibrationRecord*>& pts, const FitOptions& opt) {
  std::vector<char> used(pts.size(), 1);
  double s = 0.0;
  for (int iter = 0; iter < 8; ++iter) {
    double num = 0.0, den = 0.0;
    for (std::size_t i = 0; i < pts.size(); ++i) {
      if (!used[i]) continue;
      const double x = pts[i]->volume_bytes() / pts[i]->t_period_s;
      num += x;
      den += x * x;
    }
    s = num / den;
    std::vector<double> res;
    for (std::size_t i = 0; i < pts.size(); ++i)
      if (used[i]) res.push_back(1.0 - pts[i]->volume_bytes() * s / pts[i]->t_period_s);
    const double med = stats::median(res);
    const double sigma = kMadToSigma * stats::median_abs_deviation(res);
    bool changed = false;
    if (sigma > 0.0) {
      for (std::size_t i = 0; i < pts.size(); ++i) {
        if (!used[i]) continue;
        const double r = 1.0 - pts[i]->volume_bytes() * s / pts[i]->t_period_s;
        const int remaining = static_cast<int>(std::count(used.begin(), used.end(), 1));
        if (std::fabs(r - med) > opt.outlier_mad_threshold * sigma && remaining > opt.min_points_for_rate) {
          used[i] = 0;
          changed = true;
        }
      }
    }
    if (!changed) break;
  }
  RateFit fit;
  fit.drain_rate_bytes_per_s = 1.0 / s;
  std::vector<double> rel;
  for (std::size_t i = 0; i < pts.size(); ++i) {
    if (!used[i]) continue;
    rel.push_back(std::fabs(pts[i]->t_period_s - pts[i]->volume_bytes() * s) / pts[i]->t_period_s);
  }
  fit.points_used = static_cast<int>(rel.size());
  fit.points_rejected = static_cast<int>(pts.size() - rel.size());
  fit.median_rel_residual = stats::median(rel);
  fit.max_rel_residual = stats::max_abs(rel);
  return fit;
}

struct Line {
  double a, b;
};
Line least_squares_line(const std::vector<std::pair<double, double>>& pts, std::size_t n) {
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < n; ++i) {
    sx += pts[i].first;
    sy += pts[i].second;
    sxx += pts[i].first * pts[i].first;
    sxy += pts[i].first * pts[i].second;
  }
  const double dn = static_cast<double>(n);
  const double det = dn * sxx - sx * sx;
  if (n < 2 || std::fabs(det) <= 1e-30 * dn * sxx) return {sy / dn, 0.0};
  const double b = (dn * sxy - sx * sy) / det;
  return {(sy - b * sx) / dn, b};
}

// Least squares with MAD rejection of outliers (e.g. a preempted sample), then a refit.
Line robust_line(const std::vector<std::pair<double, double>>& pts, std::size_t n, double threshold) {
  Line line = least_squares_line(pts, n);
  if (n < 4) return line;
  std::vector<double> rel;
  for (std::size_t i = 0; i < n; ++i) rel.push_back((pts[i].second - (line.a + line.b * pts[i].first)) / pts[i].second);
  const double med = stats::median(rel), sigma = kMadToSigma * stats::median_abs_deviation(rel);
  if (!(sigma > 0)) return line;
  std::vector<std::pair<double, double>> kept;
  for (std::size_t i = 0; i < n; ++i)
    if (std::fabs(rel[i] - med) <= threshold * sigma) kept.push_back(pts[i]);
  return kept.size() >= 2 ? least_squares_line(kept, kept.size()) : line;
}

// Eq. 7 knee: T(V) = max(a + b·V, (V − Q)/R) with R fixed. Try every split of the V-sorted points
// and, for each, every Q implied by a point of the upper branch (Q_i = V_i − R·T_i); keep the
// combination with the least sum of absolute relative residuals (robust to a few outliers). A knee
// is accepted only if it explains the data much better than one straight line.
KneeFit fit_knee(int producers, std::vector<std::pair<double, double>> pts, double rate, double threshold) {
  std::sort(pts.begin(), pts.end());
  const std::size_t n = pts.size();
  auto cost_of = [&](Line line, double q, bool with_knee) {
    double c = 0.0;
    for (const auto& [v, t] : pts) {
      double pred = line.a + line.b * v;
      if (with_knee) pred = std::max(pred, (v - q) / rate);
      c += std::fabs(t - pred) / t;
    }
    return c;
  };
  const Line all = robust_line(pts, n, threshold);
  const double cost_line = cost_of(all, 0.0, false);
  KneeFit best{producers, false, pts.back().first, 0.0, all.a, all.b, static_cast<int>(n), 0, 0.0};
  double best_cost = cost_line;
  for (std::size_t j = 2; j + 2 <= n; ++j) {
    const Line lower = robust_line(pts, j, threshold);
    for (std::size_t i = j; i < n; ++i) {
      const double q = pts[i].first - rate * pts[i].second;
      if (q <= 0.0) continue;
      // The drain-limited branch must be what explains at least two points.
      int on_drain_branch = 0;
      for (const auto& [v, t] : pts) on_drain_branch += (v - q) / rate > lower.a + lower.b * v ? 1 : 0;
      if (on_drain_branch < 2) continue;
      const double c = cost_of(lower, q, true);
      if (c < best_cost) {
        best_cost = c;
        best = {producers, true, 0.0, q, lower.a, lower.b, static_cast<int>(j), static_cast<int>(n - j), 0.0};
      }
    }
  }
  // Demand a clear improvement over the single line: a knee must halve the absolute error and
  // improve the mean relative residual by at least 1 %.
  const bool clear = best_cost < 0.5 * cost_line && cost_line - best_cost > 0.01 * static_cast<double>(n);
  if (best.knee_found && !clear) {
    best = {producers, false, pts.back().first, 0.0, all.a, all.b, static_cast<int>(n), 0, 0.0};
    best_cost = cost_line;
  }
  if (best.knee_found) {
    // Knee: where the two branches meet, a + b·V = (V − Q)/R.
    const double denom = 1.0 - rate * best.floor_slope_s_per_byte;
    best.knee_volume_bytes = denom > 0 ? (best.capacity_bytes + rate * best.floor_intercept_s) / denom
                                       : best.capacity_bytes + rate * best.floor_intercept_s;
  } else {
    // No knee up to V_max: the outstanding volume at V_max is a lower bound on Q (eq. 6).
    best.capacity_bytes = peak_outstanding_bytes(pts.back().second, pts.back().first, rate);
  }
  std::vector<double> rel;
  for (const auto& [v, t] : pts) {
    double pred = best.floor_intercept_s + best.floor_slope_s_per_byte * v;
    if (best.knee_found) pred = std::max(pred, (v - best.capacity_bytes) / rate);
    rel.push_back(std::fabs(t - pred) / t);
  }
  best.median_rel_residual = stats::median(rel);
  return best;
}


// Smooth knee: with the floor line fixed, T = max(a + b·V, T_ramp(V; Q, R_iso, τ)). For one τ, each K's
// (Q, R_iso) minimise the summed absolute relative residual: R_iso on a 1 % grid from 0.6 R to 1.2 R, and for each
// R_iso every Q implied by a point above the floor (D(T_i) = V_i − Q). τ is shared: the τ of least
// total residual on a 0.05 µs grid up to 5 µs.
struct RampFit {
  double q, r, cost;
};
RampFit fit_ramp_one(const std::vector<std::pair<double, double>>& pts, const KneeFit& k, double rate, double tau,
                     double max_rate) {
  RampFit best{k.capacity_bytes, rate, std::numeric_limits<double>::infinity()};
  auto floor_of = [&](double v) { return k.floor_intercept_s + k.floor_slope_s_per_byte * v; };
  for (int step = 0; step <= 60; ++step) {
    const double r = rate * (0.6 + 0.01 * step);
    if (max_rate > 0.0 && r > max_rate) break;
    for (const auto& [vi, ti] : pts) {
      if (ti <= 1.2 * floor_of(vi)) continue;
      const double q = vi - ramped_drained_bytes(ti, r, tau);
      if (q <= 0.0) continue;
      double c = 0.0;
      for (const auto& [v, t] : pts) c += std::fabs(isolated_issue_time_ramped_s(floor_of(v), v, r, q, tau) - t) / t;
      if (c < best.cost) best = {q, r, c};
    }
  }
  return best;
}

// The simulator serves a full path first-come, so an aligned burst's last producers issue their remaining
// bytes at their own rate after the others have finished: a tail of about 0.4 of the last producer's
// remaining floor beyond the closed form's D(T) = V − Q (0.4 µs at K = 33, 104 KiB). The records show no
// such tail in the closed form's residuals, so (Q, R_iso) are chosen for both predictors at once: on a
// grid around the closed form's fit (R_iso −4 … +10 %, Q ±6 %, 1 % steps), the pair of least largest
// relative error over K's records of either predictor (ties: least summed error of both).
void refine_ramp_with_simulator(KneeFit& kf, const std::vector<std::pair<double, double>>& pts, double tau,
                                const FitOptions& options) {
  const double r0 = kf.ramped_drain_rate_bytes_per_s, q0 = kf.ramped_capacity_bytes;
  double best_max = std::numeric_limits<double>::infinity(), best_sum = best_max;
  double best_r = r0, best_q = q0;
  for (int ri = -4; ri <= 10; ++ri)
    for (int qi = -6; qi <= 6; ++qi) {
      const double r = r0 * (1.0 + 0.01 * ri), q = q0 * (1.0 + 0.01 * qi);
      if (options.max_rate_bytes_per_s > 0.0 && r > options.max_rate_bytes_per_s) continue;
      double worst = 0.0, sum = 0.0;
      for (const auto& [v, t] : pts) {
        const double floor = kf.floor_intercept_s + kf.floor_slope_s_per_byte * v;
        const double ec = std::fabs(isolated_issue_time_ramped_s(floor, v, r, q, tau) - t) / t;
        const double es = std::fabs(options.isolated_simulator(kf.producers, v / kf.producers, floor, r, q, tau) - t) / t;
        worst = std::max({worst, ec, es});
        sum += ec + es;
        if (worst > best_max) break;
      }
      if (worst < best_max - 1e-12 || (worst <= best_max + 1e-12 && sum < best_sum)) {
        best_max = worst;
        best_sum = sum;
        best_r = r;
        best_q = q;
      }
    }
  kf.ramped_drain_rate_bytes_per_s = best_r;
  kf.ramped_capacity_bytes = best_q;
}
}  // namespace

double probe_model_gap_s(const Platform& p, const CalibrationRecord& r, const std::vector<ZeroGapLoop>& loops) {
  if (r.gap_s > 0.0) return effective_gap_s(r.gap_s, p.burst_overhead_s);
  for (const auto& l : loops)
    if (l.target == r.target && l.producers == r.producers && l.bytes_per_producer == r.bytes_per_producer)
      return effective_gap_s(l.gap_s, p.burst_overhead_s);
  return effective_gap_s(0.0, p.zero_gap_overhead_s);
}

FitResult fit_platform(const std::vector<CalibrationRecord>& records, const FitOptions& options) {
  FitResult out;
  std::vector<const CalibrationRecord*> zero_gap;
  int local = 0;
  for (const auto& r : records) {
    if (r.target == StoreTarget::kLocal) {
      ++local;
      continue;
    }
    if (r.mode == BurstMode::kPeriodic && is_zero_gap(r)) zero_gap.push_back(&r);
  }
  if (static_cast<int>(zero_gap.size()) < options.min_points_for_rate)
    throw InputError("records: need at least " + std::to_string(options.min_points_for_rate) +
                     " zero-gap periodic remote records to fit the drain rate R, got " + std::to_string(zero_gap.size()));
  if (local > 0)
    out.warnings.push_back(std::to_string(local) + " local-target records are controls: only local memory's own drain is fitted from them");

  // R and T_iss0 depend on each other only through which points are drain-dominated or recovered;
  // two passes settle both.
  double rate = initial_rate(zero_gap);
  for (int pass = 0; pass < 2; ++pass) {
    out.floors = fit_floors(records, rate, pass == 1 ? &out.warnings : nullptr);
    const Platform floors_platform = floors_only_platform(out.floors, rate);
    std::vector<const CalibrationRecord*> drain_dominated;
    for (const auto* r : zero_gap) {
      // Eq. 1 holds where V/R clearly exceeds T_iss0 (period law: T_period = max(T_iss0, V/R) at G = 0).
      const double t0 = out.floors.empty() ? 0.0 : floors_platform.issue_floor_s(r->producers, r->bytes_per_producer).value;
      if (r->t_period_s >= 1.25 * t0) drain_dominated.push_back(r);
    }
    if (static_cast<int>(drain_dominated.size()) < options.min_points_for_rate)
      throw InputError("records: only " + std::to_string(drain_dominated.size()) +
                       " zero-gap periodic records are drain-dominated (T_period >= 1.25 T_iss0); need " +
                       std::to_string(options.min_points_for_rate) + " to fit R: add larger volumes");
    out.rate = fit_rate(drain_dominated, options);
    rate = out.rate.drain_rate_bytes_per_s;
    if (pass == 1 && options.max_rate_bytes_per_s > 0.0 && rate > options.max_rate_bytes_per_s) {
      const double bound = options.max_rate_bytes_per_s;
      double e_bound = 0.0;
      for (const auto* r : drain_dominated)
        e_bound = std::max(e_bound, std::fabs(r->t_period_s - drain_time_s(r->volume_bytes(), bound)) / r->t_period_s);
      out.bounded.push_back({"R", rate, bound, out.rate.max_rel_residual, e_bound});
      rate = out.rate.drain_rate_bytes_per_s = bound;
    } else if (options.max_rate_bytes_per_s > 0.0) {
      rate = std::min(rate, options.max_rate_bytes_per_s);
    }
  }
  if (out.floors.empty())
    out.warnings.push_back("no periodic gap sweep (gap > 0): T_iss0 comes from isolated bursts only");

  std::map<int, std::vector<std::pair<double, double>>> isolated;
  for (const auto& r : records)
    if (r.mode == BurstMode::kIsolated && r.target == StoreTarget::kRemote)
      isolated[r.producers].push_back({r.volume_bytes(), r.t_iss_s});
  for (auto& [k, pts] : isolated) {
    if (pts.size() < 4) {
      out.warnings.push_back("K=" + std::to_string(k) + ": " + std::to_string(pts.size()) +
                             " isolated points are too few for a knee (need 4)");
      continue;
    }
    out.knees.push_back(fit_knee(k, pts, rate, options.outlier_mad_threshold));
    if (!out.knees.back().knee_found)
      out.warnings.push_back("K=" + std::to_string(k) + ": no knee up to V=" +
                             std::to_string(static_cast<long long>(out.knees.back().knee_volume_bytes)) +
                             " B; capacity is a lower bound and is not written to the platform");
  }

  // Smooth knee: a shared ramp τ and per-K (Q, R_iso) over every isolated point.
  {
    double best_cost = std::numeric_limits<double>::infinity();
    for (int step = 0; step <= 40; ++step) {
      const double tau = 0.1e-6 * step;
      double cost = 0.0;
      std::vector<RampFit> fits;
      for (const auto& kf : out.knees) {
        if (!kf.knee_found) continue;
        fits.push_back(fit_ramp_one(isolated[kf.producers], kf, rate, tau, options.max_rate_bytes_per_s));
        cost += fits.back().cost;
      }
      if (fits.empty() || !(cost < best_cost)) continue;
      best_cost = cost;
      out.knee_ramp_s = tau;
      std::size_t i = 0;
      for (auto& kf : out.knees) {
        if (!kf.knee_found) continue;
        kf.ramped_capacity_bytes = fits[i].q;
        kf.ramped_drain_rate_bytes_per_s = fits[i].r;
        ++i;
      }
    }
    for (auto& kf : out.knees) {
      if (!kf.knee_found) continue;
      if (options.isolated_simulator) refine_ramp_with_simulator(kf, isolated[kf.producers], out.knee_ramp_s, options);
      std::vector<double> rel, sim_rel;
      for (const auto& [v, t] : isolated[kf.producers]) {
        const double floor = kf.floor_intercept_s + kf.floor_slope_s_per_byte * v;
        rel.push_back(std::fabs(isolated_issue_time_ramped_s(floor, v, kf.ramped_drain_rate_bytes_per_s,
                                                              kf.ramped_capacity_bytes, out.knee_ramp_s) - t) / t);
        if (options.isolated_simulator)
          sim_rel.push_back(std::fabs(options.isolated_simulator(kf.producers, v / kf.producers, floor,
                                                                 kf.ramped_drain_rate_bytes_per_s, kf.ramped_capacity_bytes,
                                                                 out.knee_ramp_s) - t) / t);
      }
      kf.ramped_median_rel_residual = stats::median(rel);
      kf.ramped_max_rel_residual = stats::max_abs(rel);
      if (!sim_rel.empty()) {
        kf.simulated_median_rel_residual = stats::median(sim_rel);
        kf.simulated_max_rel_residual = stats::max_abs(sim_rel);
      }
    }
  }

  // R(K): the sustained rate the periodic producers of each K see (the median producer; with
  // first-come service it can exceed the aggregate link rate, docs/model.md).
  {
    const Platform floors_platform = floors_only_platform(out.floors, rate);
    std::map<int, std::vector<const CalibrationRecord*>> by_k;
    for (const auto* r : zero_gap) {
      const double t0 = out.floors.empty() ? 0.0 : floors_platform.issue_floor_s(r->producers, r->bytes_per_producer).value;
      if (r->t_period_s >= 1.25 * t0 && drain_time_s(r->volume_bytes(), rate) >= 0.8 * r->t_period_s)
        by_k[r->producers].push_back(r);
    }
    for (const auto& [k, pts] : by_k)
      if (static_cast<int>(pts.size()) >= 2) {
        const RateFit f = fit_rate(pts, options);
        const double r_k = options.max_rate_bytes_per_s > 0.0 ? std::min(f.drain_rate_bytes_per_s, options.max_rate_bytes_per_s)
                                                              : f.drain_rate_bytes_per_s;
        out.rate_by_producers.push_back({k, f, r_k});
      }
  }

  // Probe bookkeeping per burst: h from the recovered gap-sweep points, h at G = 0 from the
  // floor-dominated zero-gap points (their period is far above the drain time).
  {
    Platform rk;
    rk.drain_rate_bytes_per_s = rate;
    for (const auto& rp : out.rate_by_producers) rk.drain_rate_by_producers.push_back({rp.producers, rp.bytes_per_s});
    std::vector<double> h, h0, h_loop;
    for (const auto& r : records) {
      if (r.mode != BurstMode::kPeriodic || r.target != StoreTarget::kRemote) continue;
      const double vr = drain_time_s(r.volume_bytes(), rk.drain_rate_at(r.producers));
      if (!is_zero_gap(r) && r.gap_s >= vr) h.push_back(r.t_period_s - r.t_iss_s - r.gap_s);
      if (is_zero_gap(r) && r.t_period_s >= 1.25 * vr) {
        h0.push_back(r.t_period_s - r.t_iss_s);
        // The same h seen through a floor-dominated zero-gap record's measured loop gap (raw.json):
        // T_period = T_iss + G_loop + h there, as on a recovered gap-sweep point.
        for (const auto& l : options.zero_gap_loops)
          if (l.target == r.target && l.producers == r.producers && l.bytes_per_producer == r.bytes_per_producer)
            h_loop.push_back(r.t_period_s - r.t_iss_s - l.gap_s);
      }
    }
    // h comes from the recovered gap-sweep points; without any (a calibration, or a cross-validation fold,
    // with no swept gap past G*), from the floor-dominated zero-gap records through their measured loop gaps
    // (0.175-0.180 us on the 2 x H200 records against 0.177 from the sweep), so that h never silently drops
    // to 0 and leaves R(K) to absorb it.
    if (!h.empty()) out.burst_overhead_s = std::max(0.0, stats::median(h));
    else if (!h_loop.empty()) out.burst_overhead_s = std::max(0.0, stats::median(h_loop));
    out.zero_gap_overhead_s = h0.empty() ? out.burst_overhead_s : std::max(0.0, stats::median(h0));
  }

  // Isolated bursts below the knee are backpressure-free by definition: each gives T_iss0 at its
  // (K, B) where no periodic gap sweep covered it. The small-B floor is curved where the knee fit's
  // floor line a + b·V is straight (K = 33, 4 KiB: 0.154 µs measured, 0.160 on the line), so a point
  // keeps its own value where it lies within 5 % of the line, the line otherwise (an outlier); the
  // point next to the knee takes the line (it may already be partly backpressured).
  for (const auto& kf : out.knees) {
    std::vector<std::pair<double, double>> below;  // (B, T) at K, below the knee
    for (const auto& r : records)
      if (r.mode == BurstMode::kIsolated && r.target == StoreTarget::kRemote && r.producers == kf.producers &&
          (!kf.knee_found || r.volume_bytes() < kf.knee_volume_bytes))
        below.emplace_back(r.bytes_per_producer, r.t_iss_s);
    std::sort(below.begin(), below.end());
    for (std::size_t i = 0; i < below.size(); ++i) {
      const double b = below[i].first;
      const bool have = std::any_of(out.floors.begin(), out.floors.end(), [&](const FloorFit& f) {
        return f.producers == kf.producers && f.bytes_per_producer == b;
      });
      if (have) continue;
      const double line = kf.floor_intercept_s + kf.floor_slope_s_per_byte * kf.producers * b;
      const bool next_to_knee = kf.knee_found && i + 1 == below.size();
      const double t0 = !next_to_knee && std::fabs(below[i].second - line) <= 0.05 * line ? below[i].second : line;
      out.floors.push_back({kf.producers, b, t0, 1, 0.0});
    }
  }

  // R(K), second step: the Chebyshev rate of the period law over every periodic remote record at K, with
  // the final floors and h. The robust slope weighs every drain-dominated period alike; the records' T_iss
  // is T_period − G − h, so near G* (T_iss small) a 0.5 % error of the period is a 10 % error of T_iss,
  // and only a fit of the issue time itself bounds that error.
  {
    Platform pk = floors_only_platform(out.floors, rate);
    for (const auto& rp : out.rate_by_producers) pk.drain_rate_by_producers.push_back({rp.producers, rp.bytes_per_s});
    pk.burst_overhead_s = out.burst_overhead_s;
    pk.zero_gap_overhead_s = out.zero_gap_overhead_s;
    for (auto& rp : out.rate_by_producers) {
      std::vector<const CalibrationRecord*> at_k;
      for (const auto& r : records)
        if (r.mode == BurstMode::kPeriodic && r.target == StoreTarget::kRemote && r.producers == rp.producers)
          at_k.push_back(&r);
      auto worst = [&](double rate_k) {
        double e = 0.0;
        for (const auto* r : at_k) {
          const double t0 = pk.issue_floor_s(r->producers, r->bytes_per_producer).value;
          const double g = probe_model_gap_s(pk, *r, options.zero_gap_loops);
          const double v = r->volume_bytes();
          e = std::max({e, std::fabs(issue_time_s(t0, v, rate_k, g) - r->t_iss_s) / r->t_iss_s,
                        std::fabs(period_s(t0, v, rate_k, g) - r->t_period_s) / r->t_period_s});
        }
        return e;
      };
      // Grid of 0.01 % steps over ±10 % of the robust rate (the error is a maximum of quasi-convex
      // functions of R, so the grid's minimum is within a step of the optimum); ties keep the robust rate.
      // With a physical bound the grid stops there; where the records' optimum lies above it, the bound is
      // written and the misfit reported.
      const double bound = options.max_rate_bytes_per_s;
      auto chebyshev = [&](bool bounded) {
        const double r0 = rp.fit.drain_rate_bytes_per_s;
        double best_rate = bounded ? std::min(r0, bound) : r0, best = worst(best_rate);
        for (int step = -1000; step <= 1000; ++step) {
          const double rk = r0 * (1.0 + 1e-4 * step);
          if (bounded && rk > bound) break;
          const double e = worst(rk);
          if (e < best - 1e-12) {
            best = e;
            best_rate = rk;
          }
        }
        return std::pair{best_rate, best};
      };
      auto [best_rate, best] = chebyshev(bound > 0.0);
      if (bound > 0.0) {
        const auto [free_rate, free_err] = chebyshev(false);
        if (free_rate > bound * (1.0 + 1e-9))
          out.bounded.push_back({"R(" + std::to_string(rp.producers) + ")", free_rate, best_rate, free_err, best});
      }
      rp.bytes_per_s = best_rate;
      rp.periodic_points = static_cast<int>(at_k.size());
      rp.max_rel_error = best;
    }
  }

  // Local drain (a control, never used for remote stores): local stores issue at a per-SM rate that does
  // not depend on K until local memory's own drain binds, so a zero-gap local record is drain-dominated
  // where its T_iss exceeds 1.1 × the smallest K's local T_iss at the same B.
  {
    std::map<double, const CalibrationRecord*> floor_at_b;
    std::vector<const CalibrationRecord*> local_zero;
    for (const auto& r : records) {
      if (r.mode != BurstMode::kPeriodic || r.target != StoreTarget::kLocal || !is_zero_gap(r)) continue;
      local_zero.push_back(&r);
      auto& f = floor_at_b[r.bytes_per_producer];
      if (!f || r.producers < f->producers) f = &r;
    }
    std::vector<const CalibrationRecord*> bound;
    for (const auto* r : local_zero) {
      const auto* f = floor_at_b[r->bytes_per_producer];
      if (f->producers < r->producers && r->t_iss_s > 1.1 * f->t_iss_s) bound.push_back(r);
    }
    if (bound.size() >= 2) {
      FitOptions lo = options;
      lo.min_points_for_rate = 2;
      out.local_rate = fit_rate(bound, lo);
    }
  }

  Platform& p = out.platform;
  p.name = "fitted";
  p.description = "Fitted by xstage fit from calibration records";
  p.drain_rate_bytes_per_s = rate;
  for (const auto& f : out.floors) p.issue_floor.push_back({f.producers, f.bytes_per_producer, f.t_iss0_s});
  for (const auto& kf : out.knees)
    if (kf.knee_found) {
      // With the smooth knee fitted, its capacity and aligned drain rate replace eq. 7's corner fit.
      if (kf.ramped_drain_rate_bytes_per_s > 0.0)
        p.capacity.push_back({kf.producers, kf.ramped_capacity_bytes, kf.ramped_drain_rate_bytes_per_s});
      else
        p.capacity.push_back({kf.producers, kf.capacity_bytes});
    }
  for (const auto& rp : out.rate_by_producers) p.drain_rate_by_producers.push_back({rp.producers, rp.bytes_per_s});
  p.knee_ramp_s = out.knee_ramp_s;
  p.burst_overhead_s = out.burst_overhead_s;
  p.zero_gap_overhead_s = out.zero_gap_overhead_s;
  p.local_drain_rate_bytes_per_s = out.local_rate.drain_rate_bytes_per_s;
  p.provenance = {{"fit",
                   {{"records", records.size()},
                    {"rate_points_used", out.rate.points_used},
                    {"rate_points_rejected", out.rate.points_rejected},
                    {"rate_median_rel_residual", out.rate.median_rel_residual},
                    {"rate_max_rel_residual", out.rate.max_rel_residual},
                    {"rate_by_producers", "minimax relative error of T_iss and T_period over every periodic remote record at K"},
                    {"zero_gap_loops", options.zero_gap_loops.empty() ? "zero_gap_overhead_us" : "raw.json gap_us"}}}};
  return out;
}

}  // namespace xstage::model
