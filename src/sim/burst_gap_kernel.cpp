#include "xstage/sim/burst_gap_kernel.hpp"

#include <algorithm>
#include <map>
#include <string>

#include "xstage/model/error.hpp"
#include "xstage/model/input_file.hpp"
#include "xstage/model/stats.hpp"
#include "xstage/model/units.hpp"
#include "xstage/sim/schedule_file.hpp"

namespace xstage::sim {

namespace {

TileIssue issue_of(const model::BurstGapKernel& k) {
  TileIssue issue;
  issue.mode = k.issue == "piggyback"         ? TileIssueMode::kPiggyback
               : k.issue == "epilogue_issuer" ? TileIssueMode::kEpilogueIssuer
                                              : TileIssueMode::kEpilogue;
  issue.chunks = k.chunks;
  issue.cover_slots = k.cover_slots;
  issue.staging_s = units::us_to_s(k.staging_us);
  return issue;
}

bool stores(const model::BurstGapTile& t) { return t.remote_bytes() > 0.0; }
int k_steps_of(const model::BurstGapKernel& k, const model::BurstGapTile& t) { return t.k_steps > 0 ? t.k_steps : k.chunks; }

// The tile kinds' generic tiles (one each; tag = index in kernel.tiles).
std::vector<TileStep> kind_steps(const model::Platform& platform, const model::BurstGapKernel& k, int producers) {
  const bool piggyback = k.issue == "piggyback";
  std::vector<TileStep> steps;
  for (std::size_t i = 0; i < k.tiles.size(); ++i) {
    const model::BurstGapTile& t = k.tiles[i];
    TileStep s;
    s.tag = static_cast<int>(i);
    s.mainloop_s = units::us_to_s(t.mainloop_us);
    s.k_steps = k_steps_of(k, t);
    if (stores(t)) {
      s.remote_bytes = t.remote_bytes();
      s.issue_floor_s = platform.issue_floor_s(producers, s.remote_bytes).value;
      if (piggyback) s.chunk_issue_floor_s = platform.issue_floor_s(producers, s.remote_bytes / k.chunks).value;
    }
    steps.push_back(s);
  }
  return steps;
}

// Eq. 10's gap after a burst of tile kind i with no stall (the tightest over the kind's tiles): the compute until
// the producer's next burst. Epilogue: the mainloops up to and including the next storing tile's, plus its
// staging. Epilogue issuer: the issuer recurs at the producer's pace, so the period less the floor,
// max(mainloops − T_iss0, staging). Piggyback: a chunk per k-step of the next tile, the k-step less the chunk's
// floor (0 when the chunks outnumber its k-steps and go back to back).
double gap_after(const model::BurstGapKernel& k, const std::vector<TileStep>& steps, std::size_t i) {
  const std::size_t n = steps.size();
  const double staging = units::us_to_s(k.staging_us);
  if (k.issue == "piggyback") {
    auto chunk_gap = [&](const TileStep& next) {
      if (k.chunks > next.k_steps) return 0.0;
      return std::max(0.0, next.mainloop_s / next.k_steps - steps[i].chunk_issue_floor_s);
    };
    double g = chunk_gap(steps[(i + 1) % n]);
    if (k.tiles[i].count > 1) g = std::min(g, chunk_gap(steps[i]));
    return g;
  }
  // Mainloops from the tile after the last of kind i's run to the next storing tile, cyclically.
  double m = 0.0;
  for (std::size_t d = 1; d <= n; ++d) {
    const std::size_t j = (i + d) % n;
    if (steps[j].remote_bytes > 0.0) {
      m += steps[j].mainloop_s;
      break;
    }
    m += steps[j].mainloop_s * static_cast<double>(k.tiles[j].count);
  }
  if (k.tiles[i].count > 1) m = std::min(m, steps[i].mainloop_s);
  if (k.issue == "epilogue_issuer") return std::max(m - steps[i].issue_floor_s, staging);
  return m + staging;
}

}  // namespace

double burst_gap_schedule_steps(const model::BurstGapKernel& k, int producers) {
  return static_cast<double>(producers) * tile_schedule_steps(static_cast<double>(k.tiles_per_producer()), issue_of(k));
}

void check_burst_gap_work(const model::BurstGapKernel& k, int producers, std::string_view origin) {
  const double steps = burst_gap_schedule_steps(k, producers);
  if (steps > static_cast<double>(kMaxScheduleSteps))
    input_fail(origin, "repeat",
               std::to_string(producers) + " producers x " + std::to_string(k.tiles_per_producer()) +
                   " tiles each make up to " + std::to_string(static_cast<long long>(steps)) +
                   " schedule steps, more than the limit of " + std::to_string(kMaxScheduleSteps));
}

TileSchedules burst_gap_schedules(const model::Platform& platform, const model::BurstGapKernel& k, int producers) {
  if (producers < 1) throw InputError("burst-gap kernel: producers must be >= 1, got " + std::to_string(producers));
  check_burst_gap_work(k, producers, "burst-gap kernel " + k.name);
  const std::vector<TileStep> kinds = kind_steps(platform, k, producers);
  std::vector<TileStep> seq;
  seq.reserve(static_cast<std::size_t>(k.tiles_per_producer()));
  for (long long r = 0; r < k.repeat; ++r)
    for (std::size_t i = 0; i < kinds.size(); ++i)
      for (long long c = 0; c < k.tiles[i].count; ++c) seq.push_back(kinds[i]);
  return tile_schedules(std::vector<std::vector<TileStep>>(static_cast<std::size_t>(producers), seq), issue_of(k));
}

BurstGapOutcome simulate_burst_gap_kernel(const model::Platform& platform, const model::BurstGapKernel& k, int producers,
                                          SimResult* timeline) {
  const TileSchedules built = burst_gap_schedules(platform, k, producers);
  const bool roles = k.issue == "epilogue_issuer";
  SimConfig cfg;
  cfg.drain_rate_bytes_per_s = platform.drain_rate_at(producers);
  cfg.capacity_bytes = platform.capacity_bytes(producers).value;
  cfg.drain_ramp_s = platform.knee_ramp_s;
  cfg.time_limit_s = kMaxSimulatedTimeS;
  cfg.record_timeline = roles || timeline != nullptr;  // the slot waits are read from the timeline
  SimResult r = simulate(cfg, built.schedules);
  SimConfig free_cfg = cfg;
  double all_bytes = 0.0;
  for (const auto& sched : built.schedules)
    for (const auto& st : sched) all_bytes += st.bytes;
  free_cfg.capacity_bytes = 2.0 * all_bytes + 1.0;  // never full: every burst issues at its floor
  free_cfg.record_timeline = false;

  BurstGapOutcome out;
  out.producers = producers;
  out.drain_rate_bytes_per_s = cfg.drain_rate_bytes_per_s;
  out.capacity_bytes = cfg.capacity_bytes;
  out.makespan_s = r.makespan_s;
  out.free_makespan_s = simulate(free_cfg, built.schedules).makespan_s;
  out.total_stall_s = r.total_stall_s;
  out.peak_outstanding_bytes = r.peak_outstanding_bytes;

  // Per role and burst ordinal: the stall and the issue time; per (producer, step): the wait.
  std::vector<std::vector<double>> stall(built.schedules.size()), issue(built.schedules.size());
  for (const auto& b : r.bursts) {
    auto& s = stall[b.producer];
    auto& t = issue[b.producer];
    if (s.size() <= static_cast<std::size_t>(b.index)) s.resize(b.index + 1, 0.0), t.resize(b.index + 1, 0.0);
    s[b.index] = std::max(0.0, b.stall_s());
    t[b.index] = b.issue_time_s();
  }
  std::map<std::pair<int, int>, double> waits;
  if (roles)
    for (const auto& sp : r.timeline)
      if (sp.kind == TimelineSpan::Kind::kWait) waits[{sp.producer, sp.step}] += sp.end_s - sp.start_s;

  // Kinds by name, in order of first appearance.
  const std::vector<TileStep> steps = kind_steps(platform, k, producers);
  std::vector<int> kind_of(k.tiles.size());
  for (std::size_t i = 0; i < k.tiles.size(); ++i) {
    int at = -1;
    for (std::size_t j = 0; j < out.kinds.size(); ++j)
      if (out.kinds[j].name == k.tiles[i].name) at = static_cast<int>(j);
    const double burst = !stores(k.tiles[i])              ? 0.0
                         : k.issue == "piggyback" ? steps[i].remote_bytes / k.chunks
                                                          : steps[i].remote_bytes;
    const double t0 = k.issue == "piggyback" ? steps[i].chunk_issue_floor_s : steps[i].issue_floor_s;
    const double gap = burst > 0.0 ? gap_after(k, steps, i) : 0.0;
    if (at < 0) {
      BurstGapKindOutcome o;
      o.name = k.tiles[i].name;
      o.burst_bytes = burst;
      o.t_iss0_s = t0;
      o.gap_s = gap;
      at = static_cast<int>(out.kinds.size());
      out.kinds.push_back(o);
    } else if (burst > 0.0 && (out.kinds[at].burst_bytes == 0.0 || gap < out.kinds[at].gap_s)) {
      out.kinds[at].burst_bytes = burst;  // a name used for tiles of different bytes: the tightest gap's
      out.kinds[at].t_iss0_s = t0;
      out.kinds[at].gap_s = gap;
    }
    kind_of[i] = at;
  }

  // Per tile what the producer loses (burst stall; with an epilogue issuer the slot wait), by kind and producer.
  const std::size_t nk = out.kinds.size();
  const long long per_repeat = k.tiles_per_producer() / k.repeat;
  struct PerProducer {
    std::vector<double> first, later_sum, later_n;
    std::vector<bool> seen;
    double period_stall = 0.0;
  };
  std::vector<PerProducer> pp(static_cast<std::size_t>(producers));
  for (auto& p : pp) p = {std::vector<double>(nk, 0.0), std::vector<double>(nk, 0.0), std::vector<double>(nk, 0.0),
                          std::vector<bool>(nk, false), 0.0};
  std::vector<std::vector<double>> tile_stall(nk), slot_wait(nk), span(nk);
  std::vector<long long> position(static_cast<std::size_t>(producers), 0);
  for (const TileRef& t : built.tiles) {
    const int kind = kind_of[t.tag];
    double burst_stall = 0.0, burst_issue = 0.0;
    for (int b = 0; b < t.bursts; ++b) {
      const std::size_t idx = static_cast<std::size_t>(t.first_burst + b);
      if (idx < stall[t.issuer].size()) burst_stall += stall[t.issuer][idx], burst_issue += issue[t.issuer][idx];
    }
    double wait = 0.0;
    if (t.slot_wait_step >= 0)
      if (auto it = waits.find({t.producer, t.slot_wait_step}); it != waits.end()) wait = it->second;
    if (t.bursts > 0) tile_stall[kind].push_back(burst_stall);
    if (roles) {
      slot_wait[kind].push_back(wait);
      if (t.bursts > 0) span[kind].push_back(units::us_to_s(k.staging_us) + burst_issue);
    }
    ++out.kinds[kind].tiles;
    const double lost = roles ? wait : burst_stall;
    PerProducer& p = pp[t.producer];
    const long long rep = position[t.producer]++ / per_repeat;
    const bool steady = rep >= k.repeat / 2;  // the second half of the repeats (all of one repeat)
    if (steady) p.period_stall += lost;
    if (!p.seen[kind]) {
      p.seen[kind] = true;
      p.first[kind] = lost;
    } else if (steady) {
      p.later_sum[kind] += lost;
      p.later_n[kind] += 1.0;
    }
  }
  std::vector<double> periods;
  for (const auto& p : pp) periods.push_back(p.period_stall / static_cast<double>(k.repeat - k.repeat / 2));
  out.steady_stall_per_period_s = stats::median(periods);
  for (std::size_t kind = 0; kind < nk; ++kind) {
    BurstGapKindOutcome& o = out.kinds[kind];
    if (!tile_stall[kind].empty()) {
      o.median_stall_s = stats::median(tile_stall[kind]);
      o.max_stall_s = stats::max_abs(tile_stall[kind]);
    }
    if (!slot_wait[kind].empty()) {
      o.median_slot_wait_s = stats::median(slot_wait[kind]);
      o.max_slot_wait_s = stats::max_abs(slot_wait[kind]);
    }
    if (!span[kind].empty()) o.median_span_s = stats::median(span[kind]);
    if (o.burst_bytes <= 0.0) continue;
    std::vector<double> first, later;
    for (const auto& p : pp) {
      first.push_back(p.first[kind]);
      later.push_back(p.later_n[kind] > 0 ? p.later_sum[kind] / p.later_n[kind] : 0.0);
    }
    o.aligned = model::design_test(o.t_iss0_s, model::burst_volume_bytes(producers, o.burst_bytes), cfg.drain_rate_bytes_per_s,
                                   cfg.capacity_bytes, o.gap_s);
    // Stalls are per tile: set them against a tile's bursts (a piggybacked tile's chunks, each with its gap).
    const double per_tile = k.issue == "piggyback" ? k.chunks : 1.0;
    o.as_built = classify_recurring_stalls(stats::median(first), stats::median(later), per_tile * o.t_iss0_s,
                                           per_tile * o.gap_s);
  }
  if (timeline) {
    *timeline = std::move(r);
    timeline->tile_kinds.clear();
    for (const auto& tile : k.tiles) timeline->tile_kinds.push_back(tile.name);  // TileStep::tag: the index
  }
  return out;
}

}  // namespace xstage::sim
