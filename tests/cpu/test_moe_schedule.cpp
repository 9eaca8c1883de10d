// MoE tile orders: every tile exactly once, dependencies satisfiable (no deadlock) for any routing,
// long-run Linear-1/Linear-2 mix independent of the lead D, and interleaving breaks up L2 runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <tuple>

#include "xstage/model/burst_gap.hpp"
#include "xstage/model/error.hpp"
#include "xstage/model/platform.hpp"
#include "xstage/model/workloads.hpp"
#include "xstage/moe/moe_fused_layout.hpp"
#include "xstage/sched/moe_schedule.hpp"
#include "xstage/sim/moe_order_simulation.hpp"

using namespace xstage::sched;
namespace sim = xstage::sim;
namespace model = xstage::model;
using xstage::InputError;

namespace {

struct Layout {
  std::vector<int> offsets;
  MoeRowLayout view(int n1, int n2) const { return {offsets.data(), static_cast<int>(offsets.size()) - 1, n1 / 2, n2 / 2}; }
};

// Random routing: some experts get no rows, a few hot experts get many.
Layout random_layout(std::mt19937& rng, int experts) {
  std::uniform_int_distribution<int> rows(0, 3), hot(5, 20);
  std::bernoulli_distribution is_hot(0.15);
  Layout l{{0}};
  for (int e = 0; e < experts; ++e) l.offsets.push_back(l.offsets.back() + (is_hot(rng) ? hot(rng) : rows(rng)));
  return l;
}

template <class Make>
std::vector<std::vector<MoeTile>> orders(int instances, Make make) {
  std::vector<std::vector<MoeTile>> out;
  for (int g = 0; g < instances; ++g)
    for (int r = 0; r < 2; ++r) {
      auto s = make(g, r);
      std::vector<MoeTile> seq;
      MoeTile t;
      while (s.next(t)) seq.push_back(t);
      out.push_back(seq);
    }
  return out;
}

void expect_exact_cover(const std::vector<std::vector<MoeTile>>& ord, const Layout& l, int n1, int n2) {
  std::set<std::tuple<int, int, int>> seen;
  for (const auto& seq : ord)
    for (const auto& t : seq) {
      const int n_max = t.stage == MoeStage::kLinear1 ? n1 : n2;
      ASSERT_GE(t.n, 0);
      ASSERT_LT(t.n, n_max);
      ASSERT_EQ(t.row, l.offsets[t.expert] + t.m);
      ASSERT_LT(t.m, l.offsets[t.expert + 1] - l.offsets[t.expert]);
      ASSERT_TRUE(seen.insert({static_cast<int>(t.stage), t.row, t.n}).second) << "tile emitted twice";
    }
  const int rows = l.offsets.back();
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(rows) * (n1 + n2));
}

// An odd Linear-2 N-tile count is padded to an even one; the kernel skips the padding tile. With as many
// instances as pairs per row (a multiple, as 66 instances over dit-moe's 6 Linear-2 pairs), the pair of a
// cursor rotates with its row, so every instance's role-1 CTA draws the padding tile equally often
// instead of one instance drawing it in every row (and doing no Linear-2 work).
TEST(MoeSchedule, PaddingTileRotatesOverInstances) {
  const int pairs = 6, rows = 12, instances = pairs;
  Layout l{{0, rows}};
  const auto ord = orders(instances, [&](int g, int r) { return ExpertWaveMoeScheduler(l.view(2, 2 * pairs), g, instances, r, 1); });
  for (int g = 0; g < instances; ++g) {
    int padding = 0;
    for (const auto& t : ord[2 * g + 1])
      if (t.stage == MoeStage::kLinear2 && t.n == 2 * pairs - 1) ++padding;
    EXPECT_EQ(padding, rows / pairs) << "instance " << g;
  }
  expect_exact_cover(ord, l, 2, 2 * pairs);
}

// Every worker runs its order in sequence; a Linear-2 tile of row p waits for all n1 Linear-1 tiles
// of row p. Returns false on deadlock (a full round with no progress before everything is done).
bool runs_to_completion(const std::vector<std::vector<MoeTile>>& ord, int n1) {
  std::vector<std::size_t> pos(ord.size(), 0);
  std::map<int, int> l1_done;
  std::size_t remaining = 0;
  for (const auto& s : ord) remaining += s.size();
  while (remaining > 0) {
    bool progress = false;
    for (std::size_t w = 0; w < ord.size(); ++w) {
      if (pos[w] == ord[w].size()) continue;
      const MoeTile& t = ord[w][pos[w]];
      if (t.stage == MoeStage::kLinear2 && l1_done[t.row] < n1) continue;
      if (t.stage == MoeStage::kLinear1) ++l1_done[t.row];
      ++pos[w];
      --remaining;
      progress = true;
    }
    if (!progress) return false;
  }
  return true;
}

int longest_l2_run(const std::vector<MoeTile>& seq) {
  int best = 0, run = 0;
  for (const auto& t : seq) {
    run = t.stage == MoeStage::kLinear2 ? run + 1 : 0;
    best = std::max(best, run);
  }
  return best;
}

}  // namespace

TEST(MoeSchedule, EveryTileExactlyOnceAndNoDeadlock) {
  std::mt19937 rng(99);
  for (int trial = 0; trial < 40; ++trial) {
    const Layout l = random_layout(rng, 1 + trial % 12);
    if (l.offsets.back() == 0) continue;
    const int n1 = 2 * (1 + trial % 5), n2 = 2 * (1 + (trial / 5) % 4), instances = 1 + trial % 7;
    for (int d : {1, 2, 5}) {
      const auto ord = orders(instances, [&](int g, int r) { return InterleavedMoeScheduler(l.view(n1, n2), g, instances, r, d); });
      expect_exact_cover(ord, l, n1, n2);
      EXPECT_TRUE(runs_to_completion(ord, n1)) << "interleaved deadlocked: trial " << trial << " D " << d;
    }
    for (int w : {1, 2, 4}) {
      const auto ord = orders(instances, [&](int g, int r) { return ExpertWaveMoeScheduler(l.view(n1, n2), g, instances, r, w); });
      expect_exact_cover(ord, l, n1, n2);
      EXPECT_TRUE(runs_to_completion(ord, n1)) << "wave deadlocked: trial " << trial;
    }
  }
}

TEST(MoeSchedule, LongRunMixIndependentOfLead) {
  Layout l{{0}};
  for (int e = 0; e < 8; ++e) l.offsets.push_back(l.offsets.back() + 64);
  const int n1 = 32, n2 = 32, instances = 4;
  for (int d : {1, 2, 4, 8, 16}) {
    const auto ord = orders(instances, [&](int g, int r) { return InterleavedMoeScheduler(l.view(n1, n2), g, instances, r, d); });
    const auto& seq = ord[0];
    int l1 = 0, l2 = 0;
    for (std::size_t i = seq.size() / 4; i < 3 * seq.size() / 4; ++i) (seq[i].stage == MoeStage::kLinear1 ? l1 : l2)++;
    EXPECT_NEAR(static_cast<double>(l1) / l2, static_cast<double>(n1) / n2, 0.05) << "D " << d;
  }
}

TEST(MoeSchedule, InterleavingBreaksUpLinear2Runs) {
  Layout l{{0}};
  for (int e = 0; e < 4; ++e) l.offsets.push_back(l.offsets.back() + 8);
  const int n1 = 8, n2 = 14, instances = 2;
  const auto wave = orders(instances, [&](int g, int r) { return ExpertWaveMoeScheduler(l.view(n1, n2), g, instances, r, 2); });
  const auto inter = orders(instances, [&](int g, int r) { return InterleavedMoeScheduler(l.view(n1, n2), g, instances, r, 2); });
  // Ignore the final drain (no Linear-1 left): compare the runs before the last Linear-1 tile.
  auto before_last_l1 = [](std::vector<MoeTile> seq) {
    while (!seq.empty() && seq.back().stage == MoeStage::kLinear2) seq.pop_back();
    return seq;
  };
  // Interleaved: L2 runs only as long as the tile mix forces (about n2/n1), wave: a whole wave's L2.
  EXPECT_LE(longest_l2_run(before_last_l1(inter[0])), (n2 + n1 - 1) / n1 + 2);
  EXPECT_GE(longest_l2_run(before_last_l1(wave[0])), 20);
}

TEST(MoeSchedule, ExpertOfRowSkipsEmptyExperts) {
  const std::vector<int> offsets = {0, 0, 3, 3, 3, 5};
  const MoeRowLayout l{offsets.data(), 5, 1, 1};
  EXPECT_EQ(l.expert_of_row(0), 1);
  EXPECT_EQ(l.expert_of_row(2), 1);
  EXPECT_EQ(l.expert_of_row(3), 4);
  EXPECT_EQ(l.expert_of_row(4), 4);
}

// The streams' cursors keep row, residues and expert by additions; every tile they give is make_tile's
// for the same cursor, over random layouts (empty and hot experts), pair counts, strides and starts,
// including strides smaller, equal and larger than the pair count and starts past the first row, and
// restarted at every expert's first row as the expert-wave order restarts them.
TEST(MoeSchedule, StreamCursorMatchesMakeTile) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const Layout l = random_layout(rng, 1 + trial % 40);
    const int rows = l.offsets.back();
    const int n1 = 2 * std::uniform_int_distribution<int>(1, 50)(rng), n2 = 2 * std::uniform_int_distribution<int>(1, 12)(rng);
    const MoeRowLayout view = l.view(n1, n2);
    const int stride = std::uniform_int_distribution<int>(1, 150)(rng);
    for (MoeStage stage : {MoeStage::kLinear1, MoeStage::kLinear2}) {
      const int pairs = stage == MoeStage::kLinear1 ? view.pairs_l1 : view.pairs_l2;
      const long long start = std::uniform_int_distribution<long long>(0, static_cast<long long>(rows) * pairs / 2 + stride)(rng);
      MoeStreamCursor c(view, stage, start, stride);
      for (long long k = start; k < static_cast<long long>(rows) * pairs; k += stride) {
        const MoeTile a = c.tile(view, stage, 1), b = view.make_tile(stage, k, 1);
        ASSERT_EQ(std::tie(a.expert, a.m, a.n, a.row), std::tie(b.expert, b.m, b.n, b.row))
            << "trial " << trial << " cursor " << k << " stride " << stride << " pairs " << pairs;
        c.advance(view);
      }
      EXPECT_GE(c.p, rows);
      // Restarted at each expert's first row (the expert-wave order's streams): the same tiles as
      // make_tile from cursor row_begin · P + start, for every start below the stride.
      for (int e = 0; e + 1 < static_cast<int>(l.offsets.size()); ++e) {
        const int s0 = std::uniform_int_distribution<int>(0, stride - 1)(rng);
        c.restart(view, e, s0);
        for (long long k = static_cast<long long>(l.offsets[e]) * pairs + s0; k < static_cast<long long>(rows) * pairs;
             k += stride) {
          const MoeTile a = c.tile(view, stage, 0), b = view.make_tile(stage, k, 0);
          ASSERT_EQ(std::tie(a.expert, a.m, a.n, a.row), std::tie(b.expert, b.m, b.n, b.row))
              << "restart at expert " << e << " start " << s0 << " cursor " << k;
          c.advance(view);
        }
      }
    }
  }
}

// The choice `plan moe --simulate` and `moe bench --schedule auto` make: concentrated Combine bursts
// on a slow path stall the wave order, so interleaving wins; on a path far faster than the bursts
// neither order stalls, and a tie (within kMoeOrderTieBand) takes the interleaved order.
TEST(MoeOrderPrediction, InterleavedWinsOnlyWhenTheWaveStalls) {
  sim::MoeOrderParams p;
  p.rows_per_expert = {6, 6, 6, 6, 6, 6, 6, 6};
  p.n1 = 8;
  p.n2 = 8;
  p.instances = 4;
  p.lead_rows = 2;
  p.experts_per_wave = default_experts_per_wave(8);
  EXPECT_EQ(p.experts_per_wave, 2);
  const sim::MoeTileCosts costs{10e-6, 10e-6, 32768.0, 0.5e-6};
  model::Platform slow = model::default_platform();
  slow.drain_rate_bytes_per_s = 2e9;  // 8 producers x 32 KiB per 10 us tile ~ 26 GB/s offered: the path backs up
  const sim::MoeOrderPrediction s = sim::predict_moe_orders(slow, p, costs);
  EXPECT_GT(s.wave.total_stall_s, s.interleaved.total_stall_s);
  EXPECT_GT(s.predicted_speedup, 1.0);
  EXPECT_EQ(s.choice, sim::MoeOrder::kInterleaved);
  EXPECT_STREQ(sim::to_string(s.choice), "interleaved");

  model::Platform fast = slow;
  fast.drain_rate_bytes_per_s = 1e15;
  const sim::MoeOrderPrediction f = sim::predict_moe_orders(fast, p, costs);
  EXPECT_NEAR(f.wave.total_stall_s, 0.0, 1e-12);
  EXPECT_NEAR(f.predicted_speedup, 1.0, 1e-9);
  EXPECT_EQ(f.choice, sim::MoeOrder::kInterleaved);
}

// The piggybacked Combine (the fused kernel's default): a Linear-2 tile's bytes leave in
// xstage::moe::kFusedCombineChunks chunks, one at each k-step of the tiles after it, each chunk's issue floor
// taken out of its k-step; chunks still pending when the next Linear-2 tile ends, or at the end, go out
// back to back. Bytes and compute time are those of the epilogue issue.
TEST(MoeOrderPrediction, PiggybackedCombineSpreadsChunksOverTheNextKSteps) {
  using K = sim::Step::Kind;
  sim::MoeTileCosts c{8e-6, 4e-6, 800.0, 1e-6};
  c.combine_chunks = 4;
  c.l1_k_steps = 8;  // 1 us per k-step
  c.l2_k_steps = 2;  // 2 us per k-step
  c.chunk_issue_floor_s = 0.25e-6;
  const std::vector<MoeTile> order = {MoeTile{MoeStage::kLinear2, 0, 0, 0, 0}, MoeTile{MoeStage::kLinear1, 0, 1, 0, 1},
                                      MoeTile{MoeStage::kLinear2, 0, 0, 1, 0}, MoeTile{MoeStage::kLinear2, 0, 0, 2, 0}};
  const sim::ProducerSchedule s = sim::moe_producer_schedule(order, c, 0);
  std::vector<K> kinds;
  double bytes = 0, compute = 0;
  for (const auto& x : s) {
    kinds.push_back(x.kind);
    bytes += x.bytes;
    compute += x.kind == K::kCompute ? x.duration_s : 0.0;
    if (x.kind == K::kBurst) {
      EXPECT_DOUBLE_EQ(x.bytes, 200.0);
      EXPECT_DOUBLE_EQ(x.issue_floor_s, 0.25e-6);
    }
  }
  const std::vector<K> expected = {
      K::kCompute,                                                                    // Linear-2 #0
      K::kBurst, K::kCompute, K::kBurst, K::kCompute, K::kBurst, K::kCompute,         // Linear-1: #0's chunks
      K::kBurst, K::kCompute, K::kCompute,                                            //   at its first 4 k-steps
      K::kCompute,                                                                    // Linear-2 #1 (nothing pending)
      K::kBurst, K::kCompute, K::kBurst, K::kCompute,                                 // Linear-2 #2: 2 k-steps,
      K::kBurst, K::kBurst,                                                           //   #1's last 2 chunks flushed
      K::kBurst, K::kBurst, K::kBurst, K::kBurst};                                    // #2's chunks at the end
  EXPECT_EQ(kinds, expected);
  EXPECT_DOUBLE_EQ(bytes, 3 * 800.0);
  EXPECT_NEAR(compute, 8e-6 + 3 * 4e-6 - 6 * 0.25e-6, 1e-15);  // the chunks' floors come out of their k-steps

  // Epilogue issue: one burst per Linear-2 tile, right after it; no Combine bytes (one rank): no burst.
  sim::MoeTileCosts e{8e-6, 4e-6, 800.0, 1e-6};
  const sim::ProducerSchedule se = sim::moe_producer_schedule(order, e, 0);
  EXPECT_EQ(std::count_if(se.begin(), se.end(), [](const sim::Step& x) { return x.kind == K::kBurst; }), 3);
  EXPECT_EQ(se[1].kind, K::kBurst);
  sim::MoeTileCosts none{8e-6, 4e-6, 0.0, 0.0};
  none.combine_chunks = 4;
  const sim::ProducerSchedule sn = sim::moe_producer_schedule(order, none, 0);
  EXPECT_EQ(std::count_if(sn.begin(), sn.end(), [](const sim::Step& x) { return x.kind == K::kBurst; }), 0);
  c.l1_k_steps = 0;
  EXPECT_THROW(sim::moe_producer_schedule(order, c, 0), InputError);
}

// Tile costs from the model: the remote part of the Combine ((N - 1)/N) and the piggyback's chunks and
// k-steps (the kernel's chunk count, bf16 k-steps of 64 channels).
TEST(MoeOrderPrediction, TileCostsCarryTheRemoteShareAndTheChunks) {
  const model::MoeShape* shape = model::find_moe_shape("deepseek-v3");
  ASSERT_NE(shape, nullptr);
  const model::MoeInput in = model::moe_input_for_shape(*shape, 132, 4.5e12, 128, 128, 2);
  const model::Platform platform = model::default_platform();
  EXPECT_DOUBLE_EQ(sim::moe_remote_share(1), 0.0);
  EXPECT_DOUBLE_EQ(sim::moe_remote_share(2), 0.5);
  EXPECT_DOUBLE_EQ(sim::moe_remote_share(8), 0.875);
  EXPECT_THROW(sim::moe_remote_share(0), InputError);
  const sim::MoeTileCosts all = sim::moe_tile_costs(platform, in, 66, 1.0, sim::MoeCombineModel::kEpilogue);
  const sim::MoeTileCosts half = sim::moe_tile_costs(platform, in, 66, 0.5);
  EXPECT_DOUBLE_EQ(all.tile_bytes, in.tile_bytes);
  EXPECT_EQ(all.combine_chunks, 0);
  EXPECT_DOUBLE_EQ(half.tile_bytes, 0.5 * in.tile_bytes);
  EXPECT_EQ(half.combine_chunks, xstage::moe::kFusedCombineChunks);
  EXPECT_EQ(half.l1_k_steps, 7168 / 64);
  EXPECT_EQ(half.l2_k_steps, 2048 / 64);
  EXPECT_GT(half.chunk_issue_floor_s, 0.0);
  EXPECT_LT(half.chunk_issue_floor_s, half.issue_floor_s);
  const sim::MoeTileCosts local = sim::moe_tile_costs(platform, in, 66, 0.0);
  EXPECT_EQ(local.tile_bytes, 0.0);
  EXPECT_EQ(local.issue_floor_s, 0.0);
  EXPECT_THROW(sim::moe_tile_costs(platform, in, 66, 1.5), InputError);
  EXPECT_THROW(sim::moe_tile_costs(platform, in, 66, 0.5, sim::MoeCombineModel::kPiggyback, 0), InputError);
}

TEST(MoeOrderPrediction, TieBandDecidesTheOrder) {
  EXPECT_EQ(sim::choose_moe_order(1.2), sim::MoeOrder::kInterleaved);
  EXPECT_EQ(sim::choose_moe_order(1.0), sim::MoeOrder::kInterleaved);
  EXPECT_EQ(sim::choose_moe_order(1.0 - sim::kMoeOrderTieBand), sim::MoeOrder::kInterleaved);
  EXPECT_EQ(sim::choose_moe_order(1.0 - sim::kMoeOrderTieBand - 1e-6), sim::MoeOrder::kExpertWave);
  EXPECT_EQ(sim::choose_moe_order(0.5), sim::MoeOrder::kExpertWave);
}

TEST(MoeOrderPrediction, RowsPerLocalExpertFromReceivedCounts) {
  // 4 experts over 2 ranks: rank 1 owns experts 2 and 3.
  const std::vector<long long> received = {0, 129, 128, 1};
  EXPECT_EQ(sim::rows_per_local_expert(received, 2, 0, 128), (std::vector<int>{0, 2}));
  EXPECT_EQ(sim::rows_per_local_expert(received, 2, 1, 128), (std::vector<int>{1, 1}));
  EXPECT_THROW(sim::rows_per_local_expert(received, 3, 0, 128), InputError);
  EXPECT_THROW(sim::rows_per_local_expert(received, 2, 2, 128), InputError);
  EXPECT_THROW(sim::rows_per_local_expert({-1, 0}, 2, 0, 128), InputError);
}

// Many Linear-1 tiles per row and few Linear-2 tiles (dit-moe's proportions): with a lead of one row
// Linear-2 tiles catch up with Linear-1 tiles still being computed by other producers and wait; a
// longer lead removes most of the wait. The X-Stage is made harmless (fast path) to isolate the effect.
TEST(MoeOrderPrediction, ShortLeadMakesLinear2WaitForItsRow) {
  sim::MoeOrderParams p;
  p.rows_per_expert = std::vector<int>(8, 8);
  p.n1 = 44;
  p.n2 = 12;
  p.n2_real = 11;
  p.instances = 16;
  p.experts_per_wave = 2;
  const sim::MoeTileCosts costs{13e-6, 53e-6, 32768.0, 0.5e-6};
  model::Platform fast = model::default_platform();
  fast.drain_rate_bytes_per_s = 1e15;
  p.lead_rows = 1;
  const sim::MoeOrderPrediction short_lead = sim::predict_moe_orders(fast, p, costs);
  p.lead_rows = 16;
  const sim::MoeOrderPrediction long_lead = sim::predict_moe_orders(fast, p, costs);
  EXPECT_GT(short_lead.interleaved.total_dependency_wait_s, 0.0);
  EXPECT_LT(long_lead.interleaved.total_dependency_wait_s, 0.5 * short_lead.interleaved.total_dependency_wait_s);
  EXPECT_LT(long_lead.interleaved.makespan_s, short_lead.interleaved.makespan_s);
  // The expert-wave order does not depend on D.
  EXPECT_DOUBLE_EQ(long_lead.wave.makespan_s, short_lead.wave.makespan_s);
  // Skipped padding tiles: 11 of 12 Linear-2 tiles per row are simulated.
  const auto orders = sim::moe_orders(sim::MoeOrder::kExpertWave, p);
  std::size_t l2_steps = 0;
  for (const auto& o : orders)
    for (const auto& s : sim::moe_producer_schedule(o, costs, p.n1, p.n2_real))
      l2_steps += s.kind == xstage::sim::Step::Kind::kBurst;
  EXPECT_EQ(l2_steps, 8u * 8u * 11u);
}

// dit-moe on the fused layer's grid (132 CTAs = 66 instances): one row holds 44 Linear-1 pairs, so a
// grid step covers 1.5 rows and eq. 16's D_knee = 2 lets Linear-2 tiles catch up with their row's
// Linear-1 tiles. The default lead (model::moe_default_lead_rows, 9 rows) cuts the predicted
// Linear-2 dependency waits and is no slower. T = 8192 balanced over 2 ranks: 8192 · 2 · top-2 / 16
// experts = 2048 tokens = 16 rows of 128 per local expert, 8 local experts; the embedded platform
// and the 4.5 TFLOP/s per SM of `moe bench --schedule auto`.
TEST(MoeOrderPrediction, DefaultLeadCutsDitMoeDependencyWaits) {
  const model::MoeShape* shape = model::find_moe_shape("dit-moe-g2-16e2a");
  ASSERT_NE(shape, nullptr);
  const int grid = 132;
  const model::MoeInput in = model::moe_input_for_shape(*shape, grid, 4.5e12, 128, 128, 2);
  sim::MoeOrderParams p;
  p.rows_per_expert = std::vector<int>(8, 16);
  sim::set_tile_counts(in, p);
  ASSERT_EQ(p.n1, 88);  // 44 Linear-1 pairs per row
  p.instances = grid / 2;
  p.experts_per_wave = default_experts_per_wave(8);
  const model::Platform platform = model::default_platform();
  const sim::MoeTileCosts costs = sim::moe_tile_costs(platform, in, p.instances);

  const int knee = static_cast<int>(model::moe_lead_knee_rows(128, grid, shape->h_inter));
  const int lead = static_cast<int>(model::moe_default_lead_rows(128, grid, shape->h_inter, shape->hidden));
  ASSERT_EQ(knee, 2);
  ASSERT_EQ(lead, 9);
  p.lead_rows = knee;
  const sim::MoeOrderPrediction at_knee = sim::predict_moe_orders(platform, p, costs);
  p.lead_rows = lead;
  const sim::MoeOrderPrediction at_default = sim::predict_moe_orders(platform, p, costs);

  EXPECT_GT(at_knee.interleaved.total_dependency_wait_s, 0.0);
  EXPECT_LT(at_default.interleaved.total_dependency_wait_s, 0.5 * at_knee.interleaved.total_dependency_wait_s);
  EXPECT_LE(at_default.interleaved.makespan_s, at_knee.interleaved.makespan_s);
  EXPECT_GT(at_default.predicted_speedup, at_knee.predicted_speedup);
  // The expert-wave order does not depend on D.
  EXPECT_DOUBLE_EQ(at_default.wave.makespan_s, at_knee.wave.makespan_s);
}

TEST(MoeSchedulePrediction, BalancedLoadSpreadsEverySlotEvenly) {
  const std::vector<long long> load = sim::balanced_expert_load(1000, 2, 16, 3);  // 6000 slots
  ASSERT_EQ(load.size(), 16u);
  long long sum = 0;
  for (long long l : load) {
    sum += l;
    EXPECT_TRUE(l == 375 || l == 376) << l;
  }
  EXPECT_EQ(sum, 6000);
  EXPECT_EQ(sim::balanced_expert_load(7, 1, 4, 1), (std::vector<long long>{2, 2, 2, 1}));
  EXPECT_THROW(sim::balanced_expert_load(-1, 1, 4, 1), InputError);
  EXPECT_THROW(sim::balanced_expert_load(8, 1, 4, 5), InputError);
}

// The layer-level prediction ("auto") is the per-rank order prediction of the same tiles, costs and routing, the
// slowest rank deciding: built here by hand from the pieces and compared number for number.
TEST(MoeSchedulePrediction, IsThePerRankPredictionOfTheSlowestRank) {
  const model::MoeShape* shape = model::find_moe_shape("dit-moe-g2-16e2a");
  ASSERT_NE(shape, nullptr);
  const model::Platform platform = model::default_platform();
  sim::MoeScheduleQuery q;
  q.hidden = shape->hidden;
  q.h_inter = shape->h_inter;
  q.experts = shape->experts;
  q.top_k = shape->top_k;
  q.ranks = 2;
  q.grid = 132;
  q.lead_rows = 9;
  q.experts_per_wave = 2;
  q.precision = "fp8";
  std::vector<long long> load(shape->experts, 0);
  for (int e = 0; e < shape->experts; ++e) load[e] = 200 + 300 * (e % 5);  // uneven: the ranks differ
  const sim::MoeSchedulePrediction got = sim::predict_moe_schedule(platform, q, load);

  const model::GemmRate rate = platform.gemm_rate_at("fp8");
  EXPECT_EQ(got.sm_flop_per_s, rate.flop_per_s_per_sm);
  const model::MoeInput in = model::moe_input_for_shape(*shape, q.grid, rate.flop_per_s_per_sm, 128, 128, 2);
  sim::MoeOrderParams p;
  sim::set_tile_counts(in, p);
  p.instances = q.grid / 2;
  p.lead_rows = q.lead_rows;
  p.experts_per_wave = q.experts_per_wave;
  const sim::MoeTileCosts costs = sim::moe_tile_costs(platform, in, p.instances, 0.5);
  double wave = 0, inter = 0;
  ASSERT_EQ(got.ranks.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    p.rows_per_expert = sim::rows_per_local_expert(load, 2, r, 128);
    const sim::MoeOrderPrediction want = sim::predict_moe_orders(platform, p, costs);
    EXPECT_DOUBLE_EQ(got.ranks[r].wave.makespan_s, want.wave.makespan_s) << r;
    EXPECT_DOUBLE_EQ(got.ranks[r].interleaved.makespan_s, want.interleaved.makespan_s) << r;
    wave = std::max(wave, want.wave.makespan_s);
    inter = std::max(inter, want.interleaved.makespan_s);
  }
  EXPECT_NE(got.ranks[0].wave.makespan_s, got.ranks[1].wave.makespan_s);  // the routing is uneven indeed
  EXPECT_DOUBLE_EQ(got.predicted_speedup, wave / inter);
  EXPECT_EQ(got.choice, sim::choose_moe_order(wave / inter));
}

TEST(MoeSchedulePrediction, RefusesWhatNoLayerHas) {
  const model::Platform platform = model::default_platform();
  sim::MoeScheduleQuery q;
  q.hidden = 2048;
  q.h_inter = 1408;
  q.experts = 16;
  q.top_k = 2;
  q.grid = 132;
  const std::vector<long long> load(16, 1024);
  EXPECT_NO_THROW(sim::predict_moe_schedule(platform, q, load));
  auto refused = [&](auto change, const char* field) {
    sim::MoeScheduleQuery bad = q;
    change(bad);
    try {
      sim::predict_moe_schedule(platform, bad, load);
      ADD_FAILURE() << field << ": accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  refused([](auto& b) { b.grid = 131; }, "grid");
  refused([](auto& b) { b.hidden = 0; }, "hidden");
  refused([](auto& b) { b.lead_rows = 0; }, "lead_rows");
  refused([](auto& b) { b.experts = 8; }, "expert loads");
  refused([](auto& b) { b.precision = "int4"; }, "int4");
}
