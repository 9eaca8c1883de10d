#include "xstage/sim/moe_order_simulation.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "xstage/model/error.hpp"
#include "xstage/model/stats.hpp"
#include "xstage/model/units.hpp"
#include "xstage/model/workloads.hpp"
#include "xstage/moe/moe_fused_layout.hpp"
#include "xstage/sim/tile_schedules.hpp"

namespace xstage::sim {

namespace {

// One MoE tile as a generic tile (tile_schedules.hpp): a Linear-1 tile signals its row once written; a Linear-2
// tile waits for its row's Linear-1 tiles and stores its Combine (tile_bytes, 0: every store is local).
TileStep moe_tile_step(const sched::MoeTile& t, const MoeTileCosts& c, int l1_tiles_per_row) {
  TileStep s;
  s.tag = static_cast<int>(t.stage);
  if (t.stage == sched::MoeStage::kLinear1) {
    s.mainloop_s = c.t_l1_mma_s;
    s.k_steps = c.l1_k_steps;
    if (l1_tiles_per_row > 0) s.signal_counter = t.row;
  } else {
    s.mainloop_s = c.t_l2_mma_s;
    s.k_steps = c.l2_k_steps;
    if (l1_tiles_per_row > 0) {
      s.wait_counter = t.row;
      s.wait_target = l1_tiles_per_row;
    }
    s.remote_bytes = c.tile_bytes > 0.0 ? c.tile_bytes : 0.0;
    s.issue_floor_s = c.issue_floor_s;
    s.chunk_issue_floor_s = c.chunk_issue_floor_s;
  }
  return s;
}

bool moe_padding(const sched::MoeTile& t, int l2_tiles_per_row) {
  return t.stage == sched::MoeStage::kLinear2 && l2_tiles_per_row > 0 && t.n >= l2_tiles_per_row;
}

}  // namespace

ProducerSchedule moe_producer_schedule(const std::vector<sched::MoeTile>& order, const MoeTileCosts& c,
                                       int l1_tiles_per_row, int l2_tiles_per_row) {
  if (l1_tiles_per_row < 0) throw InputError("moe schedule: l1_tiles_per_row must be >= 0");
  if (l2_tiles_per_row < 0) throw InputError("moe schedule: l2_tiles_per_row must be >= 0");
  if (c.combine_chunks < 0) throw InputError("moe schedule: combine_chunks must be >= 0");
  if (c.cover_slots != 0)
    throw InputError("moe schedule: a separate epilogue issuer (cover_slots " + std::to_string(c.cover_slots) +
                     ") has two roles per CTA: moe_role_schedules");
  const bool stores = c.tile_bytes > 0.0;  // none: every Combine store is local (one rank)
  const bool piggyback = stores && c.combine_chunks > 0;
  if (piggyback && (c.l1_k_steps <= 0 || c.l2_k_steps <= 0))
    throw InputError("moe schedule: k-steps per tile must be > 0 for a piggybacked Combine");
  std::vector<TileStep> seq;
  seq.reserve(order.size());
  for (const auto& t : order)
    if (!moe_padding(t, l2_tiles_per_row)) seq.push_back(moe_tile_step(t, c, l1_tiles_per_row));
  TileIssue issue;
  issue.mode = piggyback ? TileIssueMode::kPiggyback : TileIssueMode::kEpilogue;
  if (piggyback) issue.chunks = c.combine_chunks;
  issue.staging_s = c.staging_s;
  return std::move(tile_schedules({std::move(seq)}, issue).schedules.front());
}

MoeRoleSchedules moe_role_schedules(const std::vector<std::vector<sched::MoeTile>>& orders, const MoeTileCosts& c,
                                    int l1_tiles_per_row, int l2_tiles_per_row, int rows) {
  if (c.cover_slots < 1) throw InputError("moe schedule: cover_slots must be >= 1 with an epilogue issuer");
  if (l1_tiles_per_row < 0 || l2_tiles_per_row < 0 || rows < 0)
    throw InputError("moe schedule: tiles per row and rows must be >= 0");
  std::vector<std::vector<TileStep>> sequences(orders.size());
  for (std::size_t cta = 0; cta < orders.size(); ++cta)
    for (const auto& t : orders[cta]) {
      if (moe_padding(t, l2_tiles_per_row)) continue;
      if (t.row >= rows && l1_tiles_per_row > 0)
        throw InputError("moe schedule: tile row " + std::to_string(t.row) + " beyond the " + std::to_string(rows) + " rows");
      sequences[cta].push_back(moe_tile_step(t, c, l1_tiles_per_row));
    }
  TileIssue issue;
  issue.mode = TileIssueMode::kEpilogueIssuer;
  issue.cover_slots = c.cover_slots;
  issue.staging_s = c.staging_s;
  TileSchedules built = tile_schedules(sequences, issue, rows);
  MoeRoleSchedules out;
  out.schedules = std::move(built.schedules);
  for (const TileRef& t : built.tiles)
    if (t.tag == static_cast<int>(sched::MoeStage::kLinear2))
      out.l2_tiles.push_back({t.producer, t.slot_wait_step, t.issuer, t.burst_step});
  return out;
}

std::vector<std::vector<sched::MoeTile>> moe_orders(MoeOrder order, const MoeOrderParams& p) {
  auto bad = [](const std::string& what) { throw InputError("moe schedule: " + what); };
  if (p.rows_per_expert.empty()) bad("no experts");
  if (p.n1 <= 0 || p.n1 % 2 || p.n2 <= 0 || p.n2 % 2)
    bad("n1 and n2 must be positive and even, got " + std::to_string(p.n1) + " and " + std::to_string(p.n2));
  if (p.instances <= 0) bad("instances must be > 0, got " + std::to_string(p.instances));
  if (p.lead_rows <= 0) bad("lead rows must be > 0, got " + std::to_string(p.lead_rows));
  if (p.experts_per_wave <= 0) bad("experts per wave must be > 0, got " + std::to_string(p.experts_per_wave));
  if (p.n2_real < 0 || p.n2_real > p.n2) bad("n2_real must be in [0, n2], got " + std::to_string(p.n2_real));
  std::vector<int> offsets = {0};
  for (int r : p.rows_per_expert) {
    if (r < 0) bad("rows per expert must be >= 0, got " + std::to_string(r));
    offsets.push_back(offsets.back() + r);
  }
  const sched::MoeRowLayout layout{offsets.data(), static_cast<int>(p.rows_per_expert.size()), p.n1 / 2, p.n2 / 2};
  std::vector<std::vector<sched::MoeTile>> out;
  for (int g = 0; g < p.instances; ++g)
    for (int r = 0; r < 2; ++r) {
      std::vector<sched::MoeTile> seq;
      sched::MoeTile t;
      if (order == MoeOrder::kInterleaved) {
        sched::InterleavedMoeScheduler s(layout, g, p.instances, r, p.lead_rows);
        while (s.next(t)) seq.push_back(t);
      } else {
        sched::ExpertWaveMoeScheduler s(layout, g, p.instances, r, p.experts_per_wave);
        while (s.next(t)) seq.push_back(t);
      }
      out.push_back(std::move(seq));
    }
  return out;
}

const char* moe_stage_name(int stage) { return stage == 1 ? "L1" : stage == 2 ? "L2" : "?"; }

const char* to_string(MoeOrder order) { return order == MoeOrder::kInterleaved ? "interleaved" : "wave"; }

const char* to_string(MoeCombineModel combine) {
  switch (combine) {
    case MoeCombineModel::kEpilogue: return "epilogue";
    case MoeCombineModel::kEpilogueIssuer: return "epilogue_issuer";
    case MoeCombineModel::kPiggyback: break;
  }
  return "piggyback";
}

MoeCombineModel moe_combine_model(const std::string& name) {
  if (name == "epilogue") return MoeCombineModel::kEpilogue;
  if (name == "epilogue_issuer") return MoeCombineModel::kEpilogueIssuer;
  return MoeCombineModel::kPiggyback;
}

std::vector<int> rows_per_local_expert(const std::vector<long long>& received, int ranks, int rank, int block_m) {
  const int experts = static_cast<int>(received.size());
  if (ranks <= 0 || experts % ranks != 0)
    throw InputError("moe rows: " + std::to_string(ranks) + " ranks do not divide " + std::to_string(experts) + " experts");
  if (rank < 0 || rank >= ranks) throw InputError("moe rows: rank " + std::to_string(rank) + " out of range");
  if (block_m <= 0) throw InputError("moe rows: block_m must be > 0, got " + std::to_string(block_m));
  const int local = experts / ranks;
  std::vector<int> rows;
  for (int e = rank * local; e < (rank + 1) * local; ++e) {
    if (received[e] < 0) throw InputError("moe rows: negative count for expert " + std::to_string(e));
    rows.push_back(static_cast<int>((received[e] + block_m - 1) / block_m));
  }
  return rows;
}

void set_tile_counts(const model::MoeInput& in, MoeOrderParams& p) {
  p.n1 = 2 * static_cast<int>(std::ceil(in.n1 / 2));
  p.n2 = 2 * static_cast<int>(std::ceil(in.n2 / 2));
  p.n2_real = static_cast<int>(std::ceil(in.n2));
}

MoeTileCosts moe_tile_costs(const model::Platform& platform, const model::MoeInput& in, int instances,
                            double remote_share, MoeCombineModel combine, int block_k, int cover_slots) {
  if (block_k <= 0) throw InputError("moe tile costs: block_k must be > 0, got " + std::to_string(block_k));
  if (combine == MoeCombineModel::kEpilogueIssuer && cover_slots < 1)
    throw InputError("moe tile costs: cover_slots must be >= 1, got " + std::to_string(cover_slots));
  if (!(in.staging_s >= 0.0)) throw InputError("moe tile costs: staging must be >= 0");
  if (!(remote_share >= 0.0 && remote_share <= 1.0))
    throw InputError("moe tile costs: remote share must be in [0, 1], got " + std::to_string(remote_share));
  const double bytes = in.tile_bytes * remote_share;
  MoeTileCosts c{in.t_l1_mma_s, in.t_l2_mma_s, bytes, 0.0};
  c.staging_s = in.staging_s;
  if (combine == MoeCombineModel::kEpilogueIssuer) c.cover_slots = cover_slots;
  if (bytes == 0.0) return c;  // one rank: no Combine byte leaves the GPU
  c.issue_floor_s = platform.issue_floor_s(2 * instances, bytes).value;
  if (combine == MoeCombineModel::kPiggyback) {
    c.combine_chunks = moe::kFusedCombineChunks;
    const double hidden = in.n2 * in.block_n;  // Linear-1 depth; Linear-2's is h_inter
    c.l1_k_steps = std::max(1, static_cast<int>(std::ceil(hidden / block_k)));
    c.l2_k_steps = std::max(1, static_cast<int>(std::ceil(double(in.h_inter) / block_k)));
    c.chunk_issue_floor_s = platform.issue_floor_s(2 * instances, bytes / c.combine_chunks).value;
  }
  return c;
}

double moe_remote_share(int ranks) {
  if (ranks < 1) throw InputError("moe remote share: needs 1 or more ranks, got " + std::to_string(ranks));
  return double(ranks - 1) / ranks;
}

MoeOrderPrediction predict_moe_orders(const model::Platform& platform, const MoeOrderParams& p, const MoeTileCosts& costs,
                                      MoeOrderTimelines* timeline) {
  const int k = 2 * p.instances;
  SimConfig cfg;
  cfg.drain_rate_bytes_per_s = platform.drain_rate_bytes_per_s;
  cfg.capacity_bytes = platform.capacity_bytes(k).value;
  // The order comparison was chosen and measured with the proportional share of a full path; it has
  // not been re-validated under first-come service (docs/model.md, "Simulator").
  cfg.proportional_share = true;
  const bool roles = costs.cover_slots > 0;
  cfg.record_timeline = roles || timeline != nullptr;  // the roles' slot waits are read from the timeline
  int rows = 0;
  for (int r : p.rows_per_expert) rows += r;
  MoeOrderPrediction out;
  for (auto order : {MoeOrder::kExpertWave, MoeOrder::kInterleaved}) {
    const auto orders = moe_orders(order, p);
    MoeRoleSchedules role;
    std::vector<ProducerSchedule> schedules;
    if (roles) {
      role = moe_role_schedules(orders, costs, p.n1, p.n2_real, rows);
      schedules = std::move(role.schedules);
    } else {
      for (const auto& seq : orders) schedules.push_back(moe_producer_schedule(seq, costs, p.n1, p.n2_real));
    }
    cfg.time_limit_s = schedule_time_bound_s(cfg, schedules);
    SimResult r = simulate(cfg, schedules);
    std::vector<double> stalls;
    for (const auto& b : r.bursts) stalls.push_back(std::max(0.0, b.stall_s()));
    MoeOrderOutcome& o = order == MoeOrder::kExpertWave ? out.wave : out.interleaved;
    o.makespan_s = r.makespan_s;
    o.total_stall_s = r.total_stall_s;
    o.median_tile_stall_s = stalls.empty() ? 0.0 : stats::median(stalls);
    o.max_tile_stall_s = stalls.empty() ? 0.0 : stats::max_abs(stalls);
    o.peak_outstanding_bytes = r.peak_outstanding_bytes;
    o.total_dependency_wait_s = r.total_dependency_wait_s;
    if (roles) {
      // Slot waits by (producer, step); burst issue times by (issuer, burst index).
      std::map<std::pair<int, int>, double> waits;
      for (const auto& sp : r.timeline)
        if (sp.kind == TimelineSpan::Kind::kWait) waits[{sp.producer, sp.step}] += sp.end_s - sp.start_s;
      std::map<std::pair<int, int>, double> issue;
      for (const auto& b : r.bursts) issue[{b.producer, b.index}] = b.issue_time_s();
      std::map<int, int> bursts_seen;
      std::vector<double> spans, mma;
      for (const auto& t : role.l2_tiles) {
        double w = 0.0;
        if (t.slot_wait_step >= 0)
          if (auto it = waits.find({t.producer, t.slot_wait_step}); it != waits.end()) w = it->second;
        mma.push_back(w);
        double span = costs.staging_s;
        if (t.burst_step >= 0) {
          const int idx = bursts_seen[t.issuer]++;
          if (auto it = issue.find({t.issuer, idx}); it != issue.end()) span += it->second;
        }
        spans.push_back(span);
      }
      o.roles = true;
      o.l2_tiles = static_cast<int>(spans.size());
      if (!spans.empty()) {
        o.median_tile_span_s = stats::median(spans);
        o.median_mma_stall_s = stats::median(mma);
        double sum = 0.0;
        for (double x : mma) sum += x;
        o.mean_mma_stall_s = sum / static_cast<double>(mma.size());
      }
    }
    if (timeline) {
      if (!timeline->producers) timeline->producers = static_cast<int>(orders.size());
      SimResult& kept = order == MoeOrder::kExpertWave ? timeline->wave : timeline->interleaved;
      kept = std::move(r);
      kept.tile_kinds = {"", moe_stage_name(1), moe_stage_name(2)};  // TileStep::tag: the MoeStage
    }
  }
  out.predicted_speedup = out.wave.makespan_s / out.interleaved.makespan_s;
  out.choice = choose_moe_order(out.predicted_speedup);
  return out;
}

MoeSchedulePrediction predict_moe_schedule(const model::Platform& platform, const MoeScheduleQuery& q,
                                           const std::vector<long long>& received) {
  auto positive = [](const char* name, long long v) {
    if (v <= 0) throw InputError(std::string("moe schedule: ") + name + " must be > 0, got " + std::to_string(v));
  };
  positive("hidden", q.hidden);
  positive("h_inter", q.h_inter);
  positive("experts", q.experts);
  positive("top_k", q.top_k);
  positive("ranks", q.ranks);
  positive("grid", q.grid);
  positive("lead_rows", q.lead_rows);
  positive("experts_per_wave", q.experts_per_wave);
  if (q.grid % 2 != 0) throw InputError("moe schedule: grid must be even (CTA pairs), got " + std::to_string(q.grid));
  if (static_cast<int>(received.size()) != q.experts)
    throw InputError("moe schedule: " + std::to_string(received.size()) + " expert loads for " +
                     std::to_string(q.experts) + " experts");
  const model::GemmRate rate = q.sm_flop_per_s > 0 ? model::GemmRate{q.sm_flop_per_s, "given"}
                                                   : platform.gemm_rate_at(q.precision);
  const model::MoeShape shape{"layer", "caller", q.hidden, q.h_inter, q.experts, q.top_k};
  const model::MoeInput in = model::moe_input_for_shape(shape, q.grid, rate.flop_per_s_per_sm, 128, 128, 2);
  MoeOrderParams p;
  set_tile_counts(in, p);
  p.instances = q.grid / 2;
  p.lead_rows = q.lead_rows;
  p.experts_per_wave = q.experts_per_wave;
  const MoeTileCosts costs = moe_tile_costs(platform, in, p.instances, moe_remote_share(q.ranks), q.combine);
  MoeSchedulePrediction out;
  out.sm_flop_per_s = rate.flop_per_s_per_sm;
  out.rate_source = rate.source;
  for (int r = 0; r < q.ranks; ++r) {
    p.rows_per_expert = rows_per_local_expert(received, q.ranks, r, 128);
    out.ranks.push_back(predict_moe_orders(platform, p, costs));
    out.wave_makespan_s = std::max(out.wave_makespan_s, out.ranks.back().wave.makespan_s);
    out.interleaved_makespan_s = std::max(out.interleaved_makespan_s, out.ranks.back().interleaved.makespan_s);
  }
  out.predicted_speedup = out.interleaved_makespan_s > 0 ? out.wave_makespan_s / out.interleaved_makespan_s : 1.0;
  out.choice = choose_moe_order(out.predicted_speedup);
  return out;
}

std::vector<long long> balanced_expert_load(long long tokens_per_rank, int ranks, int experts, int top_k) {
  if (tokens_per_rank < 0 || ranks <= 0 || experts <= 0 || top_k <= 0 || top_k > experts)
    throw InputError("moe balanced load: needs tokens >= 0, ranks > 0 and 0 < top_k <= experts (got tokens " +
                     std::to_string(tokens_per_rank) + ", ranks " + std::to_string(ranks) + ", experts " +
                     std::to_string(experts) + ", top_k " + std::to_string(top_k) + ")");
  const long long slots = tokens_per_rank * ranks * top_k;
  std::vector<long long> load(experts, slots / experts);
  for (long long e = 0; e < slots % experts; ++e) ++load[e];
  return load;
}

MoeOrder choose_moe_order(double predicted_speedup) {
  return predicted_speedup >= 1.0 - kMoeOrderTieBand ? MoeOrder::kInterleaved : MoeOrder::kExpertWave;
}

nlohmann::json to_json(const MoeOrderOutcome& r) {
  nlohmann::json j = {{"makespan_us", units::s_to_us(r.makespan_s)},
                      {"total_stall_us", units::s_to_us(r.total_stall_s)},
                      {"median_tile_stall_us", units::s_to_us(r.median_tile_stall_s)},
                      {"max_tile_stall_us", units::s_to_us(r.max_tile_stall_s)},
                      {"peak_outstanding_bytes", r.peak_outstanding_bytes},
                      {"dependency_wait_us", units::s_to_us(r.total_dependency_wait_s)}};
  if (r.roles) {
    j["l2_tiles"] = r.l2_tiles;
    j["median_tile_span_us"] = units::s_to_us(r.median_tile_span_s);
    j["median_mma_stall_us"] = units::s_to_us(r.median_mma_stall_s);
    j["mean_mma_stall_us"] = units::s_to_us(r.mean_mma_stall_s);
  }
  return j;
}

}  // namespace xstage::sim
