#include "xstage/sim/cross_validation.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "xstage/model/error.hpp"
#include "xstage/model/units.hpp"
#include "xstage/sim/simulator.hpp"

namespace xstage::sim {

namespace {

using model::BurstMode;
using model::CalibrationRecord;
using model::StoreTarget;

bool remote(const CalibrationRecord& r) { return r.target == StoreTarget::kRemote; }

// The errors of a fidelity report's points, split by mode.
struct Collected {
  std::vector<double> pm_i, pm_p, ps_i, ps_p, im, is;
  void add(const CvPoint& p) {
    if (p.record.mode == BurstMode::kPeriodic) {
      pm_i.push_back(p.model_t_iss_rel);
      pm_p.push_back(p.model_t_period_rel);
      ps_i.push_back(p.sim_t_iss_rel);
      ps_p.push_back(p.sim_t_period_rel);
    } else {
      im.push_back(p.model_t_iss_rel);
      is.push_back(p.sim_t_iss_rel);
    }
  }
  CvErrors summary() const {
    return {summarize_errors(pm_i), summarize_errors(pm_p), summarize_errors(ps_i),
            summarize_errors(ps_p), summarize_errors(im),   summarize_errors(is)};
  }
};

std::vector<CvPoint> predict(const model::Platform& platform, const std::vector<CalibrationRecord>& records,
                             const FidelityOptions& fo, const std::string& fold) {
  const FidelityReport rep = fidelity_report(platform, records, fo);
  std::vector<CvPoint> out;
  for (const auto& pt : rep.points) {
    const auto& r = pt.record;
    CvPoint p{r, fold};
    p.model_t_iss_rel = std::fabs(pt.model_t_iss_s - r.t_iss_s) / r.t_iss_s;
    p.sim_t_iss_rel = std::fabs(pt.sim_t_iss_s - r.t_iss_s) / r.t_iss_s;
    if (r.mode == BurstMode::kPeriodic) {
      p.model_t_period_rel = std::fabs(pt.model_t_period_s - r.t_period_s) / r.t_period_s;
      p.sim_t_period_rel = std::fabs(pt.sim_t_period_s - r.t_period_s) / r.t_period_s;
    }
    out.push_back(p);
  }
  return out;
}

double max_rate(const model::Platform& p) {
  double m = p.drain_rate_bytes_per_s;
  for (const auto& d : p.drain_rate_by_producers) m = std::max(m, d.bytes_per_s);
  for (const auto& c : p.capacity) m = std::max(m, c.isolated_drain_rate_bytes_per_s);
  return m;
}

std::string fmt_bytes(double b) {
  const double kib = b / 1024.0;
  return kib == std::floor(kib) ? std::to_string(static_cast<long long>(kib)) + " KiB"
                                : std::to_string(static_cast<long long>(b)) + " B";
}

// Runs one scheme: `fold_of(i)` names the fold of remote record i ("" : in no fold, always trained on).
template <class FoldOf>
CvScheme run_scheme(const std::string& name, const std::vector<CalibrationRecord>& records, const CvOptions& o,
                    FoldOf fold_of) {
  CvScheme s;
  s.name = name;
  std::map<std::string, std::vector<std::size_t>> folds;
  for (std::size_t i = 0; i < records.size(); ++i)
    if (remote(records[i])) {
      const std::string f = fold_of(i);
      if (!f.empty()) folds[f].push_back(i);
    }
  s.folds = static_cast<int>(folds.size());
  Collected c;
  for (const auto& [fold, held] : folds) {
    const std::set<std::size_t> out(held.begin(), held.end());
    std::vector<CalibrationRecord> train, test;
    for (std::size_t i = 0; i < records.size(); ++i) (out.count(i) ? test : train).push_back(records[i]);
    // A fold whose training part cannot be fitted, or whose fit cannot predict its held-out part (no isolated
    // record left to fit a capacity from, say), is listed as failed with the reason; the other folds stand.
    model::FitResult fit;
    std::vector<CvPoint> predicted;
    try {
      fit = model::fit_platform(train, o.fit);
      if (fit.platform.issue_floor.empty()) throw InputError("no issue floor could be fitted");
      predicted = predict(fit.platform, test, o.fidelity, fold);
    } catch (const TimeLimitError&) {
      throw;  // sized by the records themselves, not by the fold: named by fidelity_report
    } catch (const InputError& e) {
      s.failed.push_back({fold, static_cast<int>(test.size()), e.what()});
      continue;
    }
    s.max_fitted_rate_bytes_per_s = std::max(s.max_fitted_rate_bytes_per_s, max_rate(fit.platform));
    for (auto& p : predicted) {
      c.add(p);
      s.points.push_back(std::move(p));
    }
  }
  s.held_out = c.summary();
  return s;
}

}  // namespace

CrossValidation cross_validate(const std::vector<CalibrationRecord>& records, const CvOptions& o) {
  if (o.k < 2 || o.k > 10) throw InputError("--folds: must be 2..10, got " + std::to_string(o.k));
  CrossValidation cv;
  cv.max_rate_bytes_per_s = o.fit.max_rate_bytes_per_s;
  {
    const model::FitResult full = model::fit_platform(records, o.fit);
    Collected c;
    for (const auto& p : predict(full.platform, records, o.fidelity, "all")) c.add(p);
    cv.in_sample = c.summary();
  }

  // k-fold: each series (mode, K, B) in its recorded order (gaps ascending), dealt to the folds in turn,
  // starting one fold later for every series so that every fold keeps points of every K.
  {
    std::map<std::tuple<int, int, double>, int> seen;
    std::vector<int> dealt(records.size(), -1);
    int series = 0;
    std::map<std::tuple<int, int, double>, int> offset;
    for (std::size_t i = 0; i < records.size(); ++i) {
      const auto& r = records[i];
      if (!remote(r)) continue;
      // Periodic records: a series per (K, B); isolated ones: a series per K (they sweep B).
      const auto key = std::tuple{static_cast<int>(r.mode), r.producers, r.mode == BurstMode::kPeriodic ? r.bytes_per_producer : 0.0};
      if (!offset.count(key)) offset[key] = series++;
      dealt[i] = (offset[key] + seen[key]++) % o.k;
    }
    cv.schemes.push_back(run_scheme(std::to_string(o.k) + "-fold", records, o,
                                    [&](std::size_t i) { return "fold " + std::to_string(dealt[i] + 1); }));
  }
  cv.schemes.push_back(run_scheme("leave one K out", records, o,
                                  [&](std::size_t i) { return "K = " + std::to_string(records[i].producers); }));
  cv.schemes.push_back(run_scheme("leave one B out", records, o,
                                  [&](std::size_t i) { return "B = " + fmt_bytes(records[i].bytes_per_producer); }));
  {
    std::set<std::pair<int, double>> swept;
    for (const auto& r : records)
      if (remote(r) && r.mode == BurstMode::kPeriodic && r.gap_s > 0.0) swept.insert({r.producers, r.bytes_per_producer});
    cv.schemes.push_back(run_scheme("leave one gap sweep out", records, o, [&](std::size_t i) -> std::string {
      const auto& r = records[i];
      if (r.mode != BurstMode::kPeriodic || !swept.count({r.producers, r.bytes_per_producer})) return "";
      return "sweep K = " + std::to_string(r.producers) + ", B = " + fmt_bytes(r.bytes_per_producer);
    }));
  }
  return cv;
}

nlohmann::json to_json(const CrossValidation& cv) {
  auto errors = [](const CvErrors& e) {
    return nlohmann::json{{"periodic", {{"model_t_iss", to_json(e.periodic_model_t_iss)},
                                        {"model_t_period", to_json(e.periodic_model_t_period)},
                                        {"sim_t_iss", to_json(e.periodic_sim_t_iss)},
                                        {"sim_t_period", to_json(e.periodic_sim_t_period)}}},
                          {"isolated", {{"model_t_iss", to_json(e.isolated_model_t_iss)}, {"sim_t_iss", to_json(e.isolated_sim_t_iss)}}}};
  };
  nlohmann::json j = {{"in_sample", errors(cv.in_sample)},
                      {"max_rate_gbps", cv.max_rate_bytes_per_s > 0 ? nlohmann::json(units::bytes_per_s_to_gbps(cv.max_rate_bytes_per_s))
                                                                    : nlohmann::json(nullptr)},
                      {"schemes", nlohmann::json::array()}};
  for (const auto& s : cv.schemes) {
    nlohmann::json e = {{"name", s.name}, {"folds", s.folds}, {"held_out", errors(s.held_out)},
                        {"max_fitted_rate_gbps", units::bytes_per_s_to_gbps(s.max_fitted_rate_bytes_per_s)},
                        {"failed_folds", nlohmann::json::array()}, {"points", nlohmann::json::array()}};
    for (const auto& f : s.failed) e["failed_folds"].push_back({{"fold", f.fold}, {"records", f.records}, {"reason", f.reason}});
    for (const auto& p : s.points) {
      const auto& r = p.record;
      nlohmann::json q = {{"fold", p.fold}, {"mode", model::to_string(r.mode)}, {"producers", r.producers},
                          {"bytes_per_producer", r.bytes_per_producer}, {"gap_us", units::s_to_us(r.gap_s)},
                          {"model_t_iss_rel_error", p.model_t_iss_rel}, {"sim_t_iss_rel_error", p.sim_t_iss_rel}};
      if (r.mode == BurstMode::kPeriodic) {
        q["model_t_period_rel_error"] = p.model_t_period_rel;
        q["sim_t_period_rel_error"] = p.sim_t_period_rel;
      }
      e["points"].push_back(q);
    }
    j["schemes"].push_back(e);
  }
  return j;
}

}  // namespace xstage::sim
