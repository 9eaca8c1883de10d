#include "xstage/sim/simulator.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "xstage/model/error.hpp"
#include "xstage/model/stats.hpp"

namespace xstage::sim {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

enum class Phase { kIdle, kCompute, kIssue, kAwaitCompletion, kLatency, kDependency, kDone };

constexpr int kMaxCounters = 1 << 24;

struct ProducerState {
  std::size_t step = 0;
  Phase phase = Phase::kIdle;
  double until_s = 0.0;          // end of a compute span or of the completion latency
  double remaining_bytes = 0.0;  // of the burst being issued
  double rate = 0.0;             // backpressure-free issue rate of that burst
  double completion_target = 0.0;  // drained-bytes mark that completes this producer's stores
  int bursts_done = 0;
  double wait_start_s = 0.0;
  double compute_start_s = 0.0;
  BurstRecord current{};
};

void validate(const SimConfig& c, const std::vector<ProducerSchedule>& schedules) {
  auto bad = [](const std::string& what) { throw InputError("simulate: " + what); };
  if (!(c.drain_rate_bytes_per_s > 0) || !std::isfinite(c.drain_rate_bytes_per_s))
    bad("drain rate must be > 0, got " + std::to_string(c.drain_rate_bytes_per_s));
  if (!(c.capacity_bytes > 0) || !std::isfinite(c.capacity_bytes))
    bad("capacity must be > 0, got " + std::to_string(c.capacity_bytes));
  if (!(c.completion_latency_s >= 0)) bad("completion latency must be >= 0");
  if (!(c.time_limit_s > 0)) bad("time limit must be > 0");
  if (schedules.empty()) bad("no producers");
  for (std::size_t p = 0; p < schedules.size(); ++p)
    for (std::size_t s = 0; s < schedules[p].size(); ++s) {
      const Step& st = schedules[p][s];
      const std::string where = "producer " + std::to_string(p) + " step " + std::to_string(s);
      if (st.kind == Step::Kind::kCompute && !(st.duration_s >= 0 && std::isfinite(st.duration_s)))
        bad(where + ": compute duration must be >= 0, got " + std::to_string(st.duration_s));
      if (st.kind == Step::Kind::kBurst && (!(st.bytes > 0) || !(st.issue_floor_s > 0) || !std::isfinite(st.bytes) ||
                                            !std::isfinite(st.issue_floor_s)))
        bad(where + ": burst needs bytes > 0 and issue floor > 0");
      if ((st.kind == Step::Kind::kSignal || st.kind == Step::Kind::kWait) && (st.counter < 0 || st.counter >= kMaxCounters))
        bad(where + ": counter must be in [0, " + std::to_string(kMaxCounters) + "), got " + std::to_string(st.counter));
      if (st.kind == Step::Kind::kWait && st.target < 0)
        bad(where + ": wait target must be >= 0, got " + std::to_string(st.target));
    }
}

}  // namespace

SimResult simulate(const SimConfig& cfg, const std::vector<ProducerSchedule>& schedules) {
  validate(cfg, schedules);
  const double R = cfg.drain_rate_bytes_per_s, Q = cfg.capacity_bytes;
  const double eps_bytes = 1e-9 * Q;
  std::vector<ProducerState> ps(schedules.size());
  SimResult out;
  double t = 0.0, q = 0.0, injected = 0.0, drained = 0.0;
  double busy_since = -1.0;  // start of the current non-empty period of the path (< 0: empty)
  int max_counter = -1;
  for (const auto& sched : schedules)
    for (const auto& st : sched) max_counter = std::max(max_counter, st.counter);
  std::vector<int> counters(static_cast<std::size_t>(max_counter + 1), 0);

  // Starts steps at time t until every producer is in a phase that takes time, is blocked on a
  // counter, or is done; repeated while a signal may have released a producer already visited.
  bool progressed = false;
  auto record = [&](TimelineSpan::Kind kind, std::size_t i, double start, const Step* st = nullptr) {
    if (!cfg.record_timeline || !(t > start)) return;
    TimelineSpan sp{kind, static_cast<int>(i), static_cast<int>(ps[i].step), start, t};
    if (st) {
      sp.role = st->role;
      sp.tag = st->tag;
      sp.tile = st->tile;
    }
    if (st && kind == TimelineSpan::Kind::kIssue) {
      sp.issue_floor_s = st->issue_floor_s;
      sp.bytes = st->bytes;
    }
    if (st && kind == TimelineSpan::Kind::kWait) sp.counter = st->counter;
    out.timeline.push_back(sp);
  };
  auto advance_producers = [&]() {
    do {
      progressed = false;
      for (std::size_t i = 0; i < ps.size(); ++i) {
        ProducerState& p = ps[i];
        for (;;) {
          if (p.phase == Phase::kDependency) {
            const Step& w = schedules[i][p.step];
            if (counters[w.counter] < w.target) break;
            out.total_dependency_wait_s += t - p.wait_start_s;
            record(TimelineSpan::Kind::kWait, i, p.wait_start_s, &w);
          }
          if (p.phase == Phase::kCompute && p.until_s > t) break;
          if (p.phase == Phase::kLatency && p.until_s > t) break;
          if (p.phase == Phase::kIssue && p.remaining_bytes > eps_bytes) break;
          if (p.phase == Phase::kAwaitCompletion && drained < p.completion_target - eps_bytes) break;
          if (p.phase == Phase::kDone) break;
          if (p.phase == Phase::kIssue) {  // burst fully accepted
            p.current.issue_end_s = t;
            out.bursts.push_back(p.current);
            record(TimelineSpan::Kind::kIssue, i, p.current.start_s, &schedules[i][p.step]);
            ++p.bursts_done;
            if (cfg.completion_coupled) {
              p.phase = Phase::kAwaitCompletion;
              p.completion_target = injected;
              p.wait_start_s = t;
              continue;
            }
            ++p.step;
          } else if (p.phase == Phase::kAwaitCompletion) {
            p.phase = Phase::kLatency;
            p.until_s = t + cfg.completion_latency_s;
            continue;
          } else if (p.phase == Phase::kLatency) {
            out.total_completion_wait_s += t - p.wait_start_s;
            record(TimelineSpan::Kind::kCompletion, i, p.wait_start_s, &schedules[i][p.step]);
            ++p.step;
          } else if (p.phase == Phase::kCompute) {
            record(TimelineSpan::Kind::kCompute, i, p.compute_start_s, &schedules[i][p.step]);
            ++p.step;
          } else if (p.phase == Phase::kDependency) {
            ++p.step;
          }
          progressed = true;
          // kIdle or a finished step: start the next one.
          if (p.step >= schedules[i].size()) {
            p.phase = Phase::kDone;
            out.makespan_s = std::max(out.makespan_s, t);
            break;
          }
          const Step& s = schedules[i][p.step];
          if (s.kind == Step::Kind::kSignal) {
            ++counters[s.counter];
            p.phase = Phase::kCompute;  // as a compute span of zero length: finished at once
            p.compute_start_s = t;
            p.until_s = t;
            continue;
          }
          if (s.kind == Step::Kind::kWait) {
            p.phase = Phase::kDependency;
            p.wait_start_s = t;
            continue;
          }
          if (s.kind == Step::Kind::kCompute) {
            p.phase = Phase::kCompute;
            p.compute_start_s = t;
            p.until_s = t + s.duration_s;
          } else {
            p.phase = Phase::kIssue;
            p.remaining_bytes = s.bytes;
            p.rate = s.bytes / s.issue_floor_s;
            p.current = {static_cast<int>(i), p.bursts_done, t, 0.0, s.issue_floor_s};
          }
        }
      }
    } while (progressed);
  };

  // The path's occupancy for the timeline (SimResult::occupancy): merged at one instant, not repeated unchanged.
  auto sample = [&]() {
    auto& o = out.occupancy;
    if (!o.empty() && o.back().t_s == t) {
      o.back().outstanding_bytes = q;
      if (o.size() >= 2 && o[o.size() - 2].outstanding_bytes == q) o.pop_back();
    } else if (o.empty() || o.back().outstanding_bytes != q) {
      o.push_back({t, q});
    }
  };
  std::vector<double> rate_now(ps.size(), 0.0);
  std::vector<std::size_t> order;
  if (cfg.record_timeline) out.occupancy.push_back({0.0, 0.0});
  advance_producers();
  for (;;) {
    bool all_done = true;
    double nominal = 0.0;
    for (const auto& p : ps) {
      if (p.phase != Phase::kDone) all_done = false;
      if (p.phase == Phase::kIssue) nominal += p.rate;
    }
    if (all_done) break;

    // Ramped drain (SimConfig::drain_ramp_s): the path drains at R·(1 − e^{−t_b/τ}), t_b the time since it
    // last left empty, held constant over steps of at most τ/16 at the step's start plus half a step.
    const bool busy = q > eps_bytes || nominal > 0.0;
    if (!busy) busy_since = -1.0;
    else if (busy_since < 0.0) busy_since = t;
    double r_now = R;
    if (cfg.drain_ramp_s > 0.0 && busy) {
      const double step_cap = cfg.drain_ramp_s / 16.0;
      r_now = R * (1.0 - std::exp(-((t - busy_since) + 0.5 * step_cap) / cfg.drain_ramp_s));
    }
    const bool full = q >= Q - eps_bytes;
    const bool limited = full && nominal > r_now;
    const double inject = limited ? r_now : nominal;
    // Each issuing producer's injection rate in this interval.
    for (std::size_t i = 0; i < ps.size(); ++i) rate_now[i] = ps[i].phase == Phase::kIssue ? ps[i].rate : 0.0;
    if (limited && cfg.proportional_share) {
      for (double& x : rate_now) x *= r_now / nominal;
    } else if (limited) {
      order.clear();
      for (std::size_t i = 0; i < ps.size(); ++i)
        if (ps[i].phase == Phase::kIssue) order.push_back(i);
      std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return ps[a].current.start_s != ps[b].current.start_s ? ps[a].current.start_s < ps[b].current.start_s : a < b;
      });
      double left = r_now;
      for (std::size_t i : order) {
        rate_now[i] = std::min(ps[i].rate, left);
        left -= rate_now[i];
      }
    }
    const double drain = (q > eps_bytes) ? r_now : std::min(r_now, inject);
    const double dq = inject - drain;

    double dt = kInf;
    for (std::size_t i = 0; i < ps.size(); ++i) {
      const auto& p = ps[i];
      if (p.phase == Phase::kCompute || p.phase == Phase::kLatency) dt = std::min(dt, p.until_s - t);
      if (p.phase == Phase::kIssue && rate_now[i] > 0) dt = std::min(dt, p.remaining_bytes / rate_now[i]);
      if (p.phase == Phase::kAwaitCompletion && drain > 0) dt = std::min(dt, (p.completion_target - drained) / drain);
    }
    if (cfg.drain_ramp_s > 0.0 && busy && r_now < R * (1.0 - 1e-6)) dt = std::min(dt, cfg.drain_ramp_s / 16.0);
    if (dq > 0 && q < Q - eps_bytes) dt = std::min(dt, (Q - q) / dq);
    if (dq < 0 && q > eps_bytes) dt = std::min(dt, q / -dq);
    if (!std::isfinite(dt)) throw InputError("simulate: no progress possible (deadlocked schedule)");
    dt = std::max(dt, 0.0);
    if (t + dt > cfg.time_limit_s)
      throw TimeLimitError("simulate: schedule did not finish within the time limit of " + std::to_string(cfg.time_limit_s) + " s");

    t += dt;
    const double q_before = q;
    q = std::clamp(q + dq * dt, 0.0, Q);
    injected += inject * dt;
    drained += drain * dt;
    for (std::size_t i = 0; i < ps.size(); ++i)
      if (ps[i].phase == Phase::kIssue) ps[i].remaining_bytes = std::max(0.0, ps[i].remaining_bytes - rate_now[i] * dt);
    out.peak_outstanding_bytes = std::max(out.peak_outstanding_bytes, q);
    const std::size_t spans_before = out.timeline.size();
    advance_producers();
    if (cfg.record_timeline &&
        (out.timeline.size() > spans_before || (q_before < Q - eps_bytes && q >= Q - eps_bytes) ||
         (q_before > eps_bytes && q <= eps_bytes)))
      sample();
  }
  // The path drains after the last producer's end: the occupancy's last sample is its emptying (at R; the result's
  // times end at the makespan).
  if (cfg.record_timeline && q > eps_bytes) out.occupancy.push_back({t + q / R, 0.0});
  for (const auto& b : out.bursts) out.total_stall_s += std::max(0.0, b.stall_s());
  return out;
}

const char* to_string(TimelineSpan::Kind kind) {
  switch (kind) {
    case TimelineSpan::Kind::kCompute: return "compute";
    case TimelineSpan::Kind::kIssue: return "issue";
    case TimelineSpan::Kind::kWait: return "wait";
    case TimelineSpan::Kind::kCompletion: return "completion";
  }
  return "?";
}

std::vector<ProducerSchedule> periodic_schedules(int producers, double bytes_per_producer, double issue_floor_s,
                                                 double gap_s, int bursts) {
  if (producers <= 0) throw InputError("simulate: producers must be > 0, got " + std::to_string(producers));
  if (bursts <= 0) throw InputError("simulate: bursts must be > 0, got " + std::to_string(bursts));
  ProducerSchedule one;
  for (int b = 0; b < bursts; ++b) {
    one.push_back(Step::burst(bytes_per_producer, issue_floor_s));
    if (gap_s > 0) one.push_back(Step::compute(gap_s));
  }
  return std::vector<ProducerSchedule>(static_cast<std::size_t>(producers), one);
}

std::vector<AggregateBurst> aggregate_by_index(const SimResult& r, int producers) {
  int n = 0;
  for (const auto& b : r.bursts) n = std::max(n, b.index + 1);
  std::vector<AggregateBurst> agg(n, AggregateBurst{kInf, 0.0});
  for (const auto& b : r.bursts) {
    if (b.producer >= producers) continue;
    agg[b.index].start_s = std::min(agg[b.index].start_s, b.start_s);
    agg[b.index].issue_end_s = std::max(agg[b.index].issue_end_s, b.issue_end_s);
  }
  return agg;
}

double schedule_time_bound_s(const SimConfig& config, const std::vector<ProducerSchedule>& schedules) {
  double serial_s = 0.0, bytes = 0.0;
  for (const ProducerSchedule& ps : schedules)
    for (const Step& st : ps) {
      serial_s += st.duration_s + st.issue_floor_s;
      if (st.kind == Step::Kind::kBurst) {
        bytes += st.bytes;
        serial_s += config.completion_latency_s + config.drain_ramp_s;
      }
    }
  const double drain_s = config.drain_rate_bytes_per_s > 0.0 ? bytes / config.drain_rate_bytes_per_s : 0.0;
  return std::clamp(2.0 * (serial_s + drain_s), 1.0, kMaxSimulatedTimeS);
}

double isolated_issue_time_s(int producers, double bytes_per_producer, double issue_floor_s, double drain_rate_bytes_per_s,
                             double capacity_bytes, double drain_ramp_s) {
  SimConfig cfg;
  cfg.drain_rate_bytes_per_s = drain_rate_bytes_per_s;
  cfg.capacity_bytes = capacity_bytes;
  cfg.drain_ramp_s = drain_ramp_s;
  const std::vector<ProducerSchedule> schedules = periodic_schedules(producers, bytes_per_producer, issue_floor_s, 0.0, 1);
  cfg.time_limit_s = schedule_time_bound_s(cfg, schedules);
  const SimResult res = simulate(cfg, schedules);
  const auto agg = aggregate_by_index(res, producers);
  return agg.at(0).issue_end_s - agg.at(0).start_s;
}

SteadyState steady_state(const SimResult& r, int producers) {
  const std::vector<AggregateBurst> agg = aggregate_by_index(r, producers);
  const int n = static_cast<int>(agg.size());
  if (n < 2) throw InputError("simulate: steady state needs at least 2 bursts");
  std::vector<double> iss, per;
  for (int i = n / 2; i < n; ++i) {
    iss.push_back(agg[i].issue_end_s - agg[i].start_s);
    if (i + 1 < n) per.push_back(agg[i + 1].start_s - agg[i].start_s);
  }
  if (per.empty()) per.push_back(agg[n - 1].start_s - agg[n - 2].start_s);
  return {stats::median(iss), stats::median(per)};
}

SteadyState producer_steady_state(const SimResult& r, int producers) {
  std::vector<std::vector<const BurstRecord*>> by(static_cast<std::size_t>(producers));
  for (const auto& b : r.bursts)
    if (b.producer >= 0 && b.producer < producers) by[b.producer].push_back(&b);
  std::vector<double> iss, per;
  for (auto& v : by) {
    if (v.size() < 2) continue;
    std::sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->index < b->index; });
    const std::size_t from = v.size() / 2;
    double sum_iss = 0.0;
    for (std::size_t i = from; i < v.size(); ++i) sum_iss += v[i]->issue_time_s();
    iss.push_back(sum_iss / static_cast<double>(v.size() - from));
    // Start-to-start over [from, last]: the last burst has no successor, so from..last−1 periods.
    const std::size_t first = std::min(from, v.size() - 2);
    per.push_back((v.back()->start_s - v[first]->start_s) / static_cast<double>(v.size() - 1 - first));
  }
  if (iss.empty()) throw InputError("simulate: steady state needs at least 2 bursts per producer");
  return {stats::median(iss), stats::median(per)};
}

}  // namespace xstage::sim
