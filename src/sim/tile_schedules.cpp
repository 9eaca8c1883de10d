#include "xstage/sim/tile_schedules.hpp"

#include <cmath>
#include <string>

#include "xstage/model/error.hpp"

namespace xstage::sim {

namespace {

void check_tile(const TileStep& t, const TileIssue& issue, int first_free_counter) {
  auto bad = [](const std::string& what) { throw InputError("tile schedule: " + what); };
  if (!(t.mainloop_s >= 0.0) || !std::isfinite(t.mainloop_s)) bad("mainloop must be >= 0");
  if (!(t.remote_bytes >= 0.0) || !std::isfinite(t.remote_bytes)) bad("remote bytes must be >= 0");
  if (!(t.issue_floor_s >= 0.0) || !(t.chunk_issue_floor_s >= 0.0)) bad("issue floors must be >= 0");
  if (issue.mode == TileIssueMode::kPiggyback && t.k_steps <= 0)
    bad("k-steps per tile must be > 0 for a piggybacked store, got " + std::to_string(t.k_steps));
  if (t.wait_counter >= 0 && t.wait_target < 0) bad("wait target must be >= 0");
  if (issue.mode == TileIssueMode::kEpilogueIssuer &&
      (t.wait_counter >= first_free_counter || t.signal_counter >= first_free_counter))
    bad("tile counter beyond the " + std::to_string(first_free_counter) + " counters of the tiles");
}

// The producer stores its tiles' remote bytes itself: one burst after the mainloop, or in chunks over the
// following tiles' k-steps.
ProducerSchedule producer_schedule(const std::vector<TileStep>& seq, const TileIssue& issue, int producer,
                                   std::vector<TileRef>& refs) {
  const bool piggyback = issue.mode == TileIssueMode::kPiggyback;
  ProducerSchedule s;
  s.reserve(seq.size() * (piggyback ? 4 + 2 * static_cast<std::size_t>(issue.chunks) : 3));
  int bursts = 0;           // bursts pushed so far (their ordinals)
  int pending = 0;          // chunks of the last storing tile not yet issued
  double chunk_bytes = 0.0, chunk_floor = 0.0;
  std::size_t pending_ref = 0;  // its TileRef
  int pending_tile = 0;         // its ordinal in the sequence
  auto chunk = [&] {
    if (refs[pending_ref].burst_step < 0) refs[pending_ref].burst_step = static_cast<int>(s.size());
    s.push_back(Step::burst(chunk_bytes, chunk_floor).as(StepRole::kStore, refs[pending_ref].tag, pending_tile));
    ++bursts;
  };
  auto flush = [&] {
    for (; pending > 0; --pending) chunk();
  };
  // A tile's mainloop: with chunks pending, one chunk at each of its first k-steps, the chunk's issue
  // taking its part of the k-step.
  auto mainloop = [&](double t, int k_steps, int tag, int tile) {
    const auto compute = [&](double seconds) {
      s.push_back(Step::compute(seconds).as(StepRole::kMainloop, tag, tile));
    };
    if (!piggyback || pending == 0) {
      compute(t);
      return;
    }
    const double step = t / k_steps;
    int k = 0;
    for (; k < k_steps && pending > 0; ++k, --pending) {
      chunk();
      if (step > chunk_floor) compute(step - chunk_floor);
    }
    if (k < k_steps) compute(step * (k_steps - k));
  };
  int tile = 0;
  for (const TileStep& t : seq) {
    refs.push_back({t.tag, producer, -1, producer, -1, -1, 0});
    if (t.wait_counter >= 0)
      s.push_back(Step::wait(t.wait_counter, t.wait_target).as(StepRole::kOperandWait, t.tag, tile));
    mainloop(t.mainloop_s, t.k_steps, t.tag, tile);
    if (t.remote_bytes > 0.0) {
      if (piggyback) {
        flush();  // the previous tile's chunks, before this tile is staged
        if (issue.staging_s > 0) s.push_back(Step::compute(issue.staging_s).as(StepRole::kStaging, t.tag, tile));
        pending = issue.chunks;
        chunk_bytes = t.remote_bytes / issue.chunks;
        chunk_floor = t.chunk_issue_floor_s;
        pending_ref = refs.size() - 1;
        pending_tile = tile;
        refs.back().first_burst = bursts;
        refs.back().bursts = issue.chunks;
      } else {
        if (issue.staging_s > 0) s.push_back(Step::compute(issue.staging_s).as(StepRole::kStaging, t.tag, tile));
        refs.back().burst_step = static_cast<int>(s.size());
        refs.back().first_burst = bursts++;
        refs.back().bursts = 1;
        s.push_back(Step::burst(t.remote_bytes, t.issue_floor_s).as(StepRole::kStore, t.tag, tile));
      }
    }
    if (t.signal_counter >= 0) s.push_back(Step::signal(t.signal_counter));
    ++tile;
  }
  flush();  // the last tile's chunks, before the completion flags
  return s;
}

}  // namespace

TileSchedules tile_schedules(const std::vector<std::vector<TileStep>>& sequences, const TileIssue& issue,
                             int first_free_counter) {
  if (issue.mode == TileIssueMode::kPiggyback && issue.chunks < 1)
    throw InputError("tile schedule: chunks must be >= 1 for a piggybacked store, got " + std::to_string(issue.chunks));
  if (issue.mode == TileIssueMode::kEpilogueIssuer && issue.cover_slots < 1)
    throw InputError("tile schedule: cover_slots must be >= 1 with an epilogue issuer");
  if (!(issue.staging_s >= 0.0)) throw InputError("tile schedule: staging must be >= 0");
  if (first_free_counter < 0) throw InputError("tile schedule: counters must be >= 0");
  for (const auto& seq : sequences)
    for (const TileStep& t : seq) check_tile(t, issue, first_free_counter);
  const int ctas = static_cast<int>(sequences.size());
  TileSchedules out;
  if (issue.mode != TileIssueMode::kEpilogueIssuer) {
    for (int p = 0; p < ctas; ++p) out.schedules.push_back(producer_schedule(sequences[p], issue, p, out.tiles));
    return out;
  }
  out.schedules.resize(2 * static_cast<std::size_t>(ctas));
  for (int cta = 0; cta < ctas; ++cta) {
    ProducerSchedule& mma = out.schedules[cta];
    ProducerSchedule& epi = out.schedules[ctas + cta];
    const int ready = first_free_counter + 2 * cta, freed = ready + 1;
    int i = 0, bursts = 0;
    for (const TileStep& t : sequences[cta]) {
      TileRef ref{t.tag, cta, -1, ctas + cta, -1, -1, 0};
      if (i >= issue.cover_slots) {
        ref.slot_wait_step = static_cast<int>(mma.size());
        // The slot of tile i − cover_slots is free.
        mma.push_back(Step::wait(freed, i - issue.cover_slots + 1).as(StepRole::kSlotWait, t.tag, i));
      }
      if (t.wait_counter >= 0)
        mma.push_back(Step::wait(t.wait_counter, t.wait_target).as(StepRole::kOperandWait, t.tag, i));
      mma.push_back(Step::compute(t.mainloop_s).as(StepRole::kMainloop, t.tag, i));
      mma.push_back(Step::signal(ready));
      epi.push_back(Step::wait(ready, i + 1).as(StepRole::kAccumulatorWait, t.tag, i));
      if (issue.staging_s > 0) epi.push_back(Step::compute(issue.staging_s).as(StepRole::kStaging, t.tag, i));
      if (t.remote_bytes > 0.0) {
        ref.burst_step = static_cast<int>(epi.size());
        ref.first_burst = bursts++;
        ref.bursts = 1;
        epi.push_back(Step::burst(t.remote_bytes, t.issue_floor_s).as(StepRole::kStore, t.tag, i));
      }
      if (t.signal_counter >= 0) epi.push_back(Step::signal(t.signal_counter));  // written by the epilogue
      epi.push_back(Step::signal(freed));
      out.tiles.push_back(ref);
      ++i;
    }
  }
  return out;
}

double tile_schedule_steps(double tiles, const TileIssue& issue) {
  switch (issue.mode) {
    case TileIssueMode::kPiggyback: return tiles * (5.0 + 2.0 * issue.chunks);
    case TileIssueMode::kEpilogueIssuer: return tiles * 10.0;
    case TileIssueMode::kEpilogue: break;
  }
  return tiles * 5.0;
}

}  // namespace xstage::sim
