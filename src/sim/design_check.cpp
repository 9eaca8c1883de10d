#include "xstage/sim/design_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "xstage/model/error.hpp"
#include "xstage/model/stats.hpp"
#include "xstage/sim/simulator.hpp"

namespace xstage::sim {

int max_recurring_burst_producers(int bursts) {
  return static_cast<int>(std::floor(std::sqrt(kMaxRecurringBurstWork / std::max(1, bursts))));
}

void require_recurring_burst_work_within(const std::string& what, double producers, double bursts) {
  const double work = recurring_burst_work(producers, bursts);
  if (work <= kMaxRecurringBurstWork) return;
  char text[256];
  std::snprintf(text, sizeof text,
                ": %.0f producers^2 x %.0f bursts = %.4g exceeds the limit of %.0f of the recurring-burst simulation "
                "(at %.0f bursts: at most %d producers)",
                producers, bursts, work, kMaxRecurringBurstWork, bursts,
                max_recurring_burst_producers(static_cast<int>(std::min(bursts, 1e9))));
  throw InputError(what + text);
}

RecurringBurstCheck recurring_burst_check(const model::Platform& platform, int producers, double bytes_per_producer,
                                          double gap_s, int bursts) {
  if (bursts < 2) throw InputError("recurring burst check: bursts must be >= 2, got " + std::to_string(bursts));
  require_recurring_burst_work_within("recurring burst check", producers, bursts);
  // No bytes (every store local): nothing enters the path, nothing stalls.
  if (bytes_per_producer <= 0.0) return classify_recurring_stalls(0.0, 0.0, 0.0, gap_s);
  const double t0 = platform.issue_floor_s(producers, bytes_per_producer).value;
  SimConfig cfg;
  cfg.drain_rate_bytes_per_s = platform.drain_rate_at(producers);
  cfg.capacity_bytes = platform.capacity_bytes(producers).value;
  cfg.drain_ramp_s = platform.knee_ramp_s;
  const std::vector<ProducerSchedule> schedules = periodic_schedules(producers, bytes_per_producer, t0, gap_s, bursts);
  cfg.time_limit_s = schedule_time_bound_s(cfg, schedules);
  const SimResult r = simulate(cfg, schedules);
  std::vector<double> first(static_cast<std::size_t>(producers), 0.0), later(static_cast<std::size_t>(producers), 0.0);
  for (const auto& b : r.bursts) {
    const double stall = std::max(0.0, b.stall_s());
    if (b.index == 0) first[b.producer] = stall;
    else later[b.producer] += stall / (bursts - 1);
  }
  return classify_recurring_stalls(stats::median(first), stats::median(later), t0, gap_s);
}

RecurringBurstCheck classify_recurring_stalls(double first_burst_stall_s, double steady_stall_s, double t0,
                                              double gap_s) {
  RecurringBurstCheck c;
  c.first_burst_stall_s = first_burst_stall_s;
  c.steady_stall_s = steady_stall_s;
  const double tolerance = 0.01 * (t0 + gap_s);
  c.tolerance_s = tolerance;
  const bool steady = c.steady_stall_s > tolerance;
  c.action = steady ? model::DesignAction::kReshape : model::DesignAction::kKeep;
  // The first burst's stall is set against its own floor: a long gap must not hide a stall of microseconds.
  const bool first_stalls = c.first_burst_stall_s > 0.01 * t0;
  c.binding_bound = steady ? "rate" : first_stalls ? "capacity (first aligned burst only)" : "none";
  return c;
}

}  // namespace xstage::sim
