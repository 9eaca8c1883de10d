// The calibration sweep planner (include/xstage/probe/sweep_plan.hpp): pure C++, the CLI and the CPU tests
// run the same code.
#include "xstage/probe/sweep_plan.hpp"

#include <algorithm>
#include <cmath>

namespace xstage::probe {

const char* to_string(SweepPhase p) {
  switch (p) {
    case SweepPhase::kZeroGap: return "zero-gap";
    case SweepPhase::kGapSweep: return "gap-sweep";
    case SweepPhase::kGapSweepMma: return "gap-sweep-mma";
    case SweepPhase::kIsolated: return "isolated";
    case SweepPhase::kPathCheck: return "path-check";
  }
  return "?";
}

namespace {

std::uint64_t round_to_16(double bytes) {
  const auto b = static_cast<std::uint64_t>(std::llround(bytes / 16.0)) * 16;
  return std::max<std::uint64_t>(b, 16);
}

std::vector<int> producer_counts(const SweepOptions& o) {
  const int kmax = std::min(o.sm_count, o.max_producers);
  std::vector<int> ks;
  for (int div : {8, 4, 2, 1}) {
    const int k = std::max(1, kmax / div);
    if (ks.empty() || ks.back() != k) ks.push_back(k);
  }
  return ks;
}

}  // namespace

double estimate_point_seconds(const PlannedPoint& p, const SweepOptions& o) {
  const double v = static_cast<double>(p.volume_bytes());
  const double drain = v / o.drain_rate_estimate;
  const double floor = o.issue_floor_estimate_s * (static_cast<double>(p.bytes_per_producer) / 32768.0);
  double burst;
  if (p.periodic) {
    burst = std::max(floor + p.gap_s, drain);
  } else {
    burst = 2.0 * std::max(floor, drain) + 20e-6 + 10e-6;  // burst, fence, recovery spin, grid barrier
  }
  return (p.bursts + p.warmup_bursts + 1) * burst + o.per_point_overhead_s;
}

void validate(const SweepOptions& o) {
  if (o.sm_count < 1) throw InputError("sweep: sm_count " + std::to_string(o.sm_count) + " (must be ≥ 1)");
  if (o.max_producers < 1) throw InputError("sweep: max_producers " + std::to_string(o.max_producers));
  if (o.max_volume_bytes < 16 * 1024) throw InputError("sweep: buffer limit " + std::to_string(o.max_volume_bytes) + " B too small");
  if (!(o.drain_rate_estimate > 0)) throw InputError("sweep: drain rate estimate must be > 0");
  if (!(o.time_budget_s > 0)) throw InputError("sweep: time budget must be > 0");
  if (o.store_bytes != 4 && o.store_bytes != 8 && o.store_bytes != 16)
    throw InputError("sweep: store bytes " + std::to_string(o.store_bytes) + " (4, 8 or 16)");
}

std::vector<std::uint64_t> isolated_ladder(const SweepOptions& o, int producers, std::uint64_t from_bytes,
                                           std::uint64_t to_volume_bytes) {
  const double step = o.quick ? std::sqrt(2.0) : std::cbrt(2.0);
  const std::uint64_t cap = std::min(to_volume_bytes, o.max_volume_bytes) / static_cast<std::uint64_t>(producers);
  std::vector<std::uint64_t> out;
  for (double b = static_cast<double>(from_bytes); b <= static_cast<double>(cap) * (1 + 1e-9); b *= step) {
    const std::uint64_t r = round_to_16(b);
    if (r > cap) break;
    if (out.empty() || out.back() != r) out.push_back(r);
  }
  return out;
}

SweepPlan plan_sweep(const SweepOptions& o) {
  validate(o);
  SweepPlan plan;
  const std::vector<int> ks = producer_counts(o);
  const int kmax = ks.back();
  const int periodic_bursts = o.quick ? 64 : 400;
  const int isolated_bursts = o.quick ? 12 : 40;
  const int warm = 8;
  auto add = [&](PlannedPoint p) {
    if (p.volume_bytes() > o.max_volume_bytes) return;
    if (p.bytes_per_producer % static_cast<std::uint64_t>(o.store_bytes) != 0) return;
    plan.points.push_back(p);
  };
  std::vector<bool> targets;  // remote first (the measurement), then the local control
  if (o.remote_available) targets.push_back(true);
  targets.push_back(false);
  if (!o.remote_available)
    plan.notes.push_back("one GPU: no remote measurement is possible; local-target control sweep only");

  // 1. Zero-gap periodic over K × B.
  const std::vector<std::uint64_t> sizes =
      o.quick ? std::vector<std::uint64_t>{8192, 32768, 131072}
              : std::vector<std::uint64_t>{4096, 8192, 16384, 32768, 65536, 131072, 262144};
  for (bool remote : targets)
    for (int k : ks)
      for (std::uint64_t b : sizes) {
        PlannedPoint p;
        p.phase = SweepPhase::kZeroGap;
        p.remote = remote;
        p.producers = k;
        p.bytes_per_producer = b;
        p.bursts = periodic_bursts;
        p.warmup_bursts = warm;
        add(p);
      }

  // 2. Gap sweep at K = kmax, B = 32 KiB, from 0 to 2.5× the estimated drain time of one burst.
  const std::uint64_t b_gap = std::min<std::uint64_t>(32768, round_to_16(static_cast<double>(o.max_volume_bytes) / kmax));
  const double v_gap = static_cast<double>(b_gap) * kmax;
  const double g_max = std::max(2.5 * v_gap / o.drain_rate_estimate, 4.0 * o.issue_floor_estimate_s);
  const int n_gap = o.quick ? 9 : 17;
  for (int with_mma = 0; with_mma < 2; ++with_mma) {
    for (bool remote : targets) {
      // The MMA-gap sweep runs once, on the measured path (remote when there is one).
      if (with_mma && remote != targets.front()) continue;
      for (int i = 0; i < n_gap; ++i) {
        PlannedPoint p;
        p.phase = with_mma ? SweepPhase::kGapSweepMma : SweepPhase::kGapSweep;
        p.remote = remote;
        p.mma_gap = with_mma != 0;
        p.producers = kmax;
        p.bytes_per_producer = b_gap;
        p.gap_s = g_max * i / (n_gap - 1);
        p.bursts = periodic_bursts;
        p.warmup_bursts = warm;
        if (with_mma && i == 0) continue;  // a zero gap has no work in it
        add(p);
      }
    }
  }

  // 3. Isolated V ladder for three producer counts (the knee's Q(K)); initial reach 4× the paper's
  //    knee scale (≈ 4.6 MiB) or the buffer, extended at run time if no knee shows.
  plan.knee_producers = {std::max(1, kmax / 4), std::max(1, kmax / 2), kmax};
  plan.knee_producers.erase(std::unique(plan.knee_producers.begin(), plan.knee_producers.end()), plan.knee_producers.end());
  const std::uint64_t initial_reach = std::min<std::uint64_t>(o.max_volume_bytes, 24ull << 20);
  for (bool remote : targets) {
    if (!remote && o.remote_available) continue;  // local isolated control only when nothing else exists
    for (int k : plan.knee_producers)
      for (std::uint64_t b : isolated_ladder(o, k, 2048, initial_reach)) {
        PlannedPoint p;
        p.phase = SweepPhase::kIsolated;
        p.periodic = false;
        p.remote = remote;
        p.producers = k;
        p.bytes_per_producer = b;
        p.bursts = isolated_bursts;
        p.warmup_bursts = 2;
        add(p);
      }
  }

  // 4. Store-path cross-check: the zero-gap remote points at full K through the other path.
  if (o.remote_available && o.path_check)
    for (std::uint64_t b : sizes) {
      PlannedPoint p;
      p.phase = SweepPhase::kPathCheck;
      p.remote = true;
      p.other_path = true;
      p.producers = kmax;
      p.bytes_per_producer = b;
      p.bursts = periodic_bursts;
      p.warmup_bursts = warm;
      add(p);
    }

  // Fit the budget: scale bursts down (keeping a floor that still gives stable medians), leaving a
  // quarter of the budget for the run-time isolated extension.
  auto total = [&] {
    double t = 0;
    for (auto& p : plan.points) t += (p.est_seconds = estimate_point_seconds(p, o));
    return t;
  };
  double t = total();
  const double target = 0.75 * o.time_budget_s;
  while (t > target && plan.burst_scale > 0.1) {
    plan.burst_scale *= 0.8;
    for (auto& p : plan.points) {
      const int floor_bursts = p.periodic ? 16 : 5;
      p.bursts = std::max(floor_bursts, static_cast<int>(std::lround(p.bursts * 0.8)));
    }
    const double nt = total();
    if (nt >= t) break;
    t = nt;
  }
  if (t > target)
    plan.notes.push_back("estimated time " + std::to_string(t) + " s exceeds 75% of the budget; the run stops at the budget");
  plan.estimated_seconds = t;
  return plan;
}

std::vector<PlannedPoint> extend_isolated(const SweepOptions& o, const PlannedPoint& last) {
  std::vector<PlannedPoint> out;
  const std::uint64_t reach = last.volume_bytes() * 2;
  for (std::uint64_t b : isolated_ladder(o, last.producers, last.bytes_per_producer, reach)) {
    if (b <= last.bytes_per_producer) continue;
    PlannedPoint p = last;
    p.bytes_per_producer = b;
    p.est_seconds = estimate_point_seconds(p, o);
    out.push_back(p);
  }
  return out;
}

}  // namespace xstage::probe
