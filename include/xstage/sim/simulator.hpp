// Event simulator of the X-Stage: producers issue remote-store bursts into one path that drains at
// rate R and holds at most Q outstanding bytes; issue stalls while the path is full.
//
// Fluid model, exact between events: each issuing producer injects at its backpressure-free rate
// (burst bytes / T_iss0 of that burst); while the outstanding volume q is below Q every producer
// issues at that rate and q drains at R; when q reaches Q the total injection is limited to R,
// served first-come (by the start of each producer's current burst, ties by producer index), each
// producer up to its own rate — or, with `proportional_share`, shared in proportion to the rates.
// First-come service is what the H200 pair measured: an aligned burst's producers finish one after
// another (the isolated bursts' per-producer spread), and periodic producers that stalled once stay
// staggered, so a recurring burst that meets the rate bound stops meeting Q (docs/model.md).
// With `drain_ramp_s` = τ > 0 the path drains at R·(1 − e^{−t_b/τ}), t_b the time since it last left
// empty (the smooth knee of burst_gap.hpp), held constant over steps of at most τ/16 (not exact there). In completion-coupled mode a producer, after
// issuing a burst, waits until everything injected so far has drained (FIFO) plus a fixed latency
// before its next step — the paper's counterfactual.
// Dependencies between producers (e.g. a Linear-2 tile that reads the Linear-1 tiles of its row, which
// other producers compute): a producer's `signal` step adds one to a counter, a `wait` step blocks the
// producer until the counter reaches its target. Both take no time.
#pragma once

#include <string>
#include <vector>

#include "xstage/model/error.hpp"

namespace xstage::sim {

// The simulated time passed SimConfig::time_limit_s: the schedule is too long for the limit. Its callers name
// the arguments that sized the schedule (the simulator knows only the schedule).
class TimeLimitError : public InputError {
 public:
  using InputError::InputError;
};

// What a step is in the kernel, for timelines only (the simulation ignores it): kByKind reads a compute step
// as a mainloop, a burst as epilogue stores and a wait as an operand wait; the tile schedules
// (tile_schedules.hpp) name staging and their roles' waits.
enum class StepRole : unsigned char { kByKind, kMainloop, kStaging, kStore, kOperandWait, kSlotWait, kAccumulatorWait };

struct Step {
  enum class Kind { kCompute, kBurst, kSignal, kWait };
  Kind kind;
  double duration_s = 0.0;     // compute span
  double bytes = 0.0;          // burst bytes (this producer)
  double issue_floor_s = 0.0;  // backpressure-free issue time of this burst (T_iss0 at its K, B)
  int counter = -1;            // signal / wait: counter index (>= 0)
  int target = 0;              // wait: proceed once the counter is >= target
  // Timeline labels (copied to TimelineSpan): the role, the caller's tile kind (SimResult::tile_kinds indexes
  // it; -1: none) and the tile's ordinal in its producer's sequence (-1: none).
  StepRole role = StepRole::kByKind;
  int tag = -1;
  int tile = -1;

  Step& as(StepRole r, int tile_kind = -1, int tile_ordinal = -1) {
    role = r;
    tag = tile_kind;
    tile = tile_ordinal;
    return *this;
  }

  static Step compute(double seconds) { return {Kind::kCompute, seconds, 0.0, 0.0}; }
  static Step burst(double bytes, double issue_floor_s) { return {Kind::kBurst, 0.0, bytes, issue_floor_s}; }
  static Step signal(int counter) { return {Kind::kSignal, 0.0, 0.0, 0.0, counter, 0}; }
  static Step wait(int counter, int target) { return {Kind::kWait, 0.0, 0.0, 0.0, counter, target}; }
};

using ProducerSchedule = std::vector<Step>;

struct SimConfig {
  double drain_rate_bytes_per_s = 0.0;
  double capacity_bytes = 0.0;
  bool completion_coupled = false;
  double completion_latency_s = 0.0;
  double time_limit_s = 10.0;  // simulated time bound (a schedule that never ends is an error)
  bool proportional_share = false;  // false: first-come service while the path is full
  double drain_ramp_s = 0.0;  // τ: drain R·(1 − e^{−t/τ}) after the path leaves empty (platform knee_ramp); 0: R
  bool record_timeline = false;  // fill SimResult::timeline (one span per step that takes time)
};

struct BurstRecord {
  int producer;
  int index;            // burst number within its producer
  double start_s;       // first byte may be issued
  double issue_end_s;   // last byte accepted (sender-visible issue end)
  double issue_floor_s;
  double issue_time_s() const { return issue_end_s - start_s; }
  double stall_s() const { return issue_time_s() - issue_floor_s; }
};

// One span of a producer's timeline (SimConfig::record_timeline): a compute step, a burst's issue (from its
// start to its last accepted byte; the part beyond issue_floor_s is stall), a wait on a counter, or the
// completion-coupled wait. Zero-length spans are left out.
struct TimelineSpan {
  enum class Kind { kCompute, kIssue, kWait, kCompletion };
  Kind kind;
  int producer;
  int step;          // index into the producer's schedule
  double start_s;
  double end_s;
  double issue_floor_s = 0.0;  // kIssue: the burst's backpressure-free issue time
  double bytes = 0.0;          // kIssue: the burst's bytes
  int counter = -1;            // kWait: the counter waited on
  StepRole role = StepRole::kByKind;  // the step's labels (Step::role, tag, tile); a completion wait: its burst's
  int tag = -1;
  int tile = -1;
};
const char* to_string(TimelineSpan::Kind kind);  // "compute", "issue", "wait", "completion"

struct SimResult {
  std::vector<BurstRecord> bursts;  // in order of issue end
  double makespan_s = 0.0;          // last producer's end
  double peak_outstanding_bytes = 0.0;
  double total_stall_s = 0.0;       // Σ over bursts of (issue time − floor), all producers
  double total_completion_wait_s = 0.0;  // completion-coupled waiting, all producers
  double total_dependency_wait_s = 0.0;  // time blocked in wait steps, all producers
  std::vector<TimelineSpan> timeline;    // with SimConfig::record_timeline, in order of span end
  // With SimConfig::record_timeline: the path's outstanding bytes (injected − drained), sampled at t = 0, at every
  // span's end and wherever the path fills (q reaches Q) or empties; q is linear between events (except under
  // a drain ramp), and a last sample where the path has drained after the makespan (at R). Samples at one instant
  // are merged and an unchanged value is not repeated, so there are at most as many samples as spans plus fill
  // and empty events plus two.
  struct OccupancySample {
    double t_s;
    double outstanding_bytes;
  };
  std::vector<OccupancySample> occupancy;
  // Names of TimelineSpan::tag (the callers' tile kinds), filled by the kernel simulations for their traces:
  // the tile names of a burst-gap description, "L1"/"L2" (moe_stage_name) for a MoE layer. Empty: unnamed.
  std::vector<std::string> tile_kinds;
};

// Throws xstage::InputError for a bad configuration or schedule.
SimResult simulate(const SimConfig& config, const std::vector<ProducerSchedule>& schedules);

// The longest simulated time any simulation may cover (about 17 minutes): past it the microsecond events of a
// schedule are no longer resolved in double precision well enough to tell a stall from none.
inline constexpr double kMaxSimulatedTimeS = 1e3;

// The simulated-time limit (SimConfig::time_limit_s) of a fixed-size simulation (a calibration record, a
// recurring-burst check, a MoE layer's orders): twice the span with every step of every producer run one after
// another (compute, issue floors, the completion latency and a drain ramp per burst) plus every byte drained at R,
// at least 1 s and at most kMaxSimulatedTimeS. A schedule that progresses finishes within it unless it is longer
// than kMaxSimulatedTimeS; then TimeLimitError, which the callers name by the inputs that sized it.
double schedule_time_bound_s(const SimConfig& config, const std::vector<ProducerSchedule>& schedules);

// K identical producers: `bursts` × (burst of B bytes, then a gap of G), the microbenchmark's pattern.
std::vector<ProducerSchedule> periodic_schedules(int producers, double bytes_per_producer, double issue_floor_s,
                                                 double gap_s, int bursts);

// Bursts of the same index across producers as one aggregate burst: earliest start, latest issue end.
struct AggregateBurst {
  double start_s;
  double issue_end_s;
};
std::vector<AggregateBurst> aggregate_by_index(const SimResult& result, int producers);

// One aligned burst of K producers × B bytes from an empty path (the calibration's isolated burst):
// the slowest producer's issue time, first-come service, drain R with ramp τ (SimConfig::drain_ramp_s).
// The one simulator prediction of an isolated record: the fidelity report and the knee fit
// (model::FitOptions::isolated_simulator) both call it.
double isolated_issue_time_s(int producers, double bytes_per_producer, double issue_floor_s, double drain_rate_bytes_per_s,
                             double capacity_bytes, double drain_ramp_s);

struct SteadyState {
  double issue_time_s;  // median burst issue time over the second half of the bursts (aggregate burst)
  double period_s;      // median start-to-start period over the second half
};
// Medians over the second half of the aggregate bursts (aggregate_by_index).
SteadyState steady_state(const SimResult& result, int producers);
// The probe's statistic (docs/probe_notes.md): per producer the mean issue time and mean
// start-to-start period over the second half of its bursts, then the median producer.
SteadyState producer_steady_state(const SimResult& result, int producers);

}  // namespace xstage::sim
