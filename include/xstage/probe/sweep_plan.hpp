// The calibration sweep planner (pure C++, no CUDA, src/probe/sweep_plan.cpp in xstage_probe_plan: the CLI and the
// CPU tests run the same code).
//
// The standard sweep of `xstage calibrate` (the paper's §3 measurements):
//  1. zero-gap periodic bursts over K × B (remote, plus the local control) → R from T_period = V/R;
//  2. a gap sweep at the largest K and B = 32 KiB, from G = 0 to past the plateau (≥ 2.5× the
//     estimated V/R), remote and local control with a spin gap, and remote (or local) with an MMA gap
//     → T_iss0 from the plateau, eq. 3 and the period law checked point by point;
//  3. isolated bursts over a geometric V ladder for ≥ 3 producer counts → the knee, Q(K); extended
//     at run time (extend_isolated) until a knee is found or the buffer limit is reached.
// Every point carries a cost estimate; bursts are scaled down until the whole plan fits the budget.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "xstage/model/error.hpp"

namespace xstage::probe {

enum class SweepPhase { kZeroGap, kGapSweep, kGapSweepMma, kIsolated, kPathCheck };

const char* to_string(SweepPhase p);  // "zero-gap", "gap-sweep", "gap-sweep-mma", "isolated", "path-check"

struct SweepOptions {
  bool quick = false;
  int sm_count = 0;
  int max_producers = 0;              // co-resident limit
  std::uint64_t max_volume_bytes = 0; // per sender, from the buffer
  bool remote_available = false;      // ≥ 2 GPUs
  bool path_check = false;            // also run the zero-gap remote points through the other store path
  double drain_rate_estimate = 0;     // bytes/s: copy-engine bandwidth (or local copy when no peer)
  double issue_floor_estimate_s = 1e-6;  // per 32 KiB burst at full K, a prior for the gap range only
  double time_budget_s = 0;           // the whole sweep, device time
  double per_point_overhead_s = 8e-3; // launch, poison, verification, clock measurement
  int store_bytes = 16;
};

struct PlannedPoint {
  SweepPhase phase = SweepPhase::kZeroGap;
  bool periodic = true;
  bool remote = true;
  bool mma_gap = false;
  bool other_path = false;  // path-check points: run through the second store path
  int producers = 0;
  std::uint64_t bytes_per_producer = 0;
  double gap_s = 0;
  int bursts = 0;
  int warmup_bursts = 0;
  double est_seconds = 0;

  std::uint64_t volume_bytes() const { return bytes_per_producer * static_cast<std::uint64_t>(producers); }
};

struct SweepPlan {
  std::vector<PlannedPoint> points;
  std::vector<int> knee_producers;     // K values of the isolated sweep
  double estimated_seconds = 0;
  double burst_scale = 1.0;            // < 1 when bursts were reduced to fit the budget
  std::vector<std::string> notes;
};

// Time one point takes on the device (upper-ish estimate), used for the budget and the ETA.
double estimate_point_seconds(const PlannedPoint& p, const SweepOptions& o);

// Throws InputError naming the first option out of range.
void validate(const SweepOptions& o);

// The isolated ladder's per-producer sizes from `from_bytes` up to `max_volume / K`, geometric.
std::vector<std::uint64_t> isolated_ladder(const SweepOptions& o, int producers, std::uint64_t from_bytes,
                                           std::uint64_t to_volume_bytes);

// The standard sweep (the three phases above, and the store-path check), bursts scaled to fit the budget.
// Throws InputError (validate).
SweepPlan plan_sweep(const SweepOptions& o);

// Next isolated points for producer count K after `last_bytes` per producer showed no knee: one more
// doubling of reach (geometric steps), or nothing when the buffer limit was already reached.
std::vector<PlannedPoint> extend_isolated(const SweepOptions& o, const PlannedPoint& last);

}  // namespace xstage::probe
