// Turns MoE tile orders (include/xstage/sched/moe_schedule.hpp) into simulator schedules, so the
// expert-wave and interleaved orders can be compared on a platform before a kernel runs. The schedules are
// built by the generic tile builder (sim::tile_schedules, tile_schedules.hpp) from the orders as tile sequences.
#pragma once

#include <string>
#include <vector>

#include "xstage/model/audit.hpp"
#include "xstage/model/platform.hpp"
#include "xstage/sched/moe_schedule.hpp"
#include "xstage/sim/simulator.hpp"

namespace xstage::sim {

struct MoeTileCosts {
  double t_l1_mma_s;     // Linear-1 tile mainloop
  double t_l2_mma_s;     // Linear-2 tile mainloop
  double tile_bytes;     // Combine bytes of one Linear-2 tile (V_t)
  double issue_floor_s;  // T_iss0 of one tile's burst at the aligned producer count
  // Piggybacked Combine (the fused kernel's default issue): a Linear-2 tile's bytes leave in
  // `combine_chunks` equal chunks, one at each k-step of the tiles that follow it (l1_k_steps,
  // l2_k_steps per tile), each chunk taking chunk_issue_floor_s of the k-step's time when nothing
  // stalls it. 0: the whole tile as one burst right after its mainloop (the epilogue issue).
  int combine_chunks = 0;
  int l1_k_steps = 1, l2_k_steps = 1;
  double chunk_issue_floor_s = 0.0;
  // Staging of a tile before its Combine stores (accumulators to shared memory): on the producer after a
  // Linear-2 mainloop, or with a separate epilogue issuer on that role for every tile.
  double staging_s = 0.0;
  // A separate epilogue issuer (MegaMoE's epilogue warps; moe_role_schedules): `cover_slots` accumulator slots
  // shared with the producer, which may run that many tiles ahead of the issuer minus one (2: double-buffered,
  // eq. 15's cover window is the next mainloop). 0: the producer stores the Combine itself.
  int cover_slots = 0;
};

// One producer per worker: Linear-1 → compute, then signal its row; Linear-2 → wait until all
// `l1_tiles_per_row` Linear-1 tiles of its row are done (the kernel's per-row readiness counter),
// compute, then its Combine: one burst (epilogue issue) or, piggybacked, one chunk per k-step of the
// following tiles; chunks still pending when the next Linear-2 tile ends, or at the end, go out back to
// back first, as the kernel stores them before it stages the next tile. l1_tiles_per_row = 0 leaves the
// dependencies out. Linear-2 tiles with n >= l2_tiles_per_row are the padding of an odd tile count (the
// kernel skips them); 0: none.
ProducerSchedule moe_producer_schedule(const std::vector<sched::MoeTile>& order, const MoeTileCosts& costs,
                                       int l1_tiles_per_row, int l2_tiles_per_row = 0);

// Two roles per CTA (MoeTileCosts::cover_slots > 0): the producer runs every tile's mainloop, waiting at a
// tile's entry for a free accumulator slot (eq. 15's stall) and, for a Linear-2 tile, for its row; the epilogue
// issuer takes the tiles in order, stages each (staging_s) and, for a Linear-2 tile, stores its Combine in one
// burst; a Linear-1 tile's row is signalled when its epilogue has written it, and the slot is freed after the
// tile's epilogue. Producers [0, C) are the CTAs' producer roles, [C, 2C) their epilogue issuers (C =
// orders.size()). `rows` is the number of row counters the orders use (counters past it are the slots').
struct MoeRoleSchedules {
  std::vector<ProducerSchedule> schedules;
  // Per Linear-2 tile (in producer order): its producer index and the step of its slot wait (-1: none, the
  // tile is among the first cover_slots), its epilogue issuer and the step of its burst.
  struct L2Tile {
    int producer, slot_wait_step, issuer, burst_step;
  };
  std::vector<L2Tile> l2_tiles;
};
MoeRoleSchedules moe_role_schedules(const std::vector<std::vector<sched::MoeTile>>& orders, const MoeTileCosts& costs,
                                    int l1_tiles_per_row, int l2_tiles_per_row, int rows);

enum class MoeOrder { kExpertWave, kInterleaved };

struct MoeOrderParams {
  std::vector<int> rows_per_expert;  // scheduler rows of each local expert (routing)
  int n1 = 0, n2 = 0;                // N-tiles per row, even
  int n2_real = 0;                   // Linear-2 N-tiles that exist (n2 - 1 when padded to even); 0: n2
  int instances = 1;                 // G: CTA pairs; producers = 2·G
  int lead_rows = 1;                 // D (interleaved)
  int experts_per_wave = 1;          // expert-wave
};

// All producers' orders for one policy (2·G workers: instance g, role r at index 2g + r).
std::vector<std::vector<sched::MoeTile>> moe_orders(MoeOrder order, const MoeOrderParams& params);

const char* to_string(MoeOrder order);  // "wave", "interleaved"

// Scheduler rows of each local expert of `rank` from the per-expert token counts summed over all
// source ranks (global expert index; expert e lives on rank e / (E / ranks)).
std::vector<int> rows_per_local_expert(const std::vector<long long>& received_per_expert, int ranks, int rank,
                                       int block_m);

// Scheduler N-tile counts of the model's MoE input: paired CTAs take N-tiles two at a time, so an odd
// count is padded by one tile, which the kernel skips (n2_real is the unpadded Linear-2 count).
void set_tile_counts(const model::MoeInput& in, MoeOrderParams& p);

// How the Combine of a Linear-2 tile is issued: the fused kernel's `--combine` (epilogue: the producer stores the
// tile after its mainloop; piggyback: in chunks over the next tiles' k-steps) or a separate epilogue issuer
// (MegaMoE's; MoeTileCosts::cover_slots).
enum class MoeCombineModel { kEpilogue, kPiggyback, kEpilogueIssuer };
const char* to_string(MoeCombineModel combine);  // "epilogue", "piggyback", "epilogue_issuer"
// The model of a combine name: "epilogue", "epilogue_issuer", else the default, piggybacked (the bench's "both"
// runs it too).
MoeCombineModel moe_combine_model(const std::string& name);

// Tile costs of the model's MoE input on a platform (T_iss0 at the aligned producer count 2·instances).
// remote_share: the part of a tile's Combine bytes that crosses to another GPU, in [0, 1]: (N − 1)/N on N ranks
// when every rank sends as many tokens (a row goes back to its token's rank; the owner's own tokens'
// rows are local stores, outside the X-Stage path). Piggybacked: moe::kFusedCombineChunks chunks per
// tile, k-steps of block_k channels (64: bf16 tiles, the rate the model's tile times assume).
// kEpilogueIssuer: cover_slots slots (>= 1). MoeInput::staging_s becomes MoeTileCosts::staging_s.
MoeTileCosts moe_tile_costs(const model::Platform& platform, const model::MoeInput& in, int instances,
                            double remote_share = 1.0, MoeCombineModel combine = MoeCombineModel::kPiggyback,
                            int block_k = 64, int cover_slots = 2);
// (N − 1)/N: the remote part of the Combine on N ranks (see moe_tile_costs); 0 on one rank, where the
// tiles' Combine is left out of the simulation.
double moe_remote_share(int ranks);

// One order through the event simulator.
struct MoeOrderOutcome {
  double makespan_s = 0, total_stall_s = 0, median_tile_stall_s = 0, max_tile_stall_s = 0;
  double peak_outstanding_bytes = 0;
  double total_dependency_wait_s = 0;  // Linear-2 tiles waiting for their row's Linear-1 tiles, all producers
  // With a separate epilogue issuer, per Linear-2 tile: the sender-visible store span T_RS (staging + issue,
  // the paper's Figure 10) and the producer's wait for a free slot at the tile's entry (eq. 15's Δt; zeros
  // included), medians over the tiles; `l2_tiles` counts them. Without one: 0.
  bool roles = false;
  int l2_tiles = 0;
  double median_tile_span_s = 0, median_mma_stall_s = 0, mean_mma_stall_s = 0;
};
// Within this band of predicted speedup (wave / interleaved makespan) the orders count as tied and the
// choice is the interleaved one: the simulator carries the X-Stage and the row dependencies, not the
// memory-system effect of mixing Linear-1 and Linear-2 work, which measured on H200 favours
// interleaving (docs/moe_notes.md).
inline constexpr double kMoeOrderTieBand = 0.05;
// The order to run for a predicted speedup: interleaved unless it is predicted slower by more than the band.
MoeOrder choose_moe_order(double predicted_speedup);

// Both orders for one routing, and the choice (`xstage plan moe --simulate`, `xstage moe bench
// --schedule auto`): choose_moe_order of the predicted speedup.
// The simulation carries both the X-Stage (Combine bursts into the calibrated path) and the
// Linear-1 → Linear-2 row dependencies (a lead too short for the grid makes Linear-2 tiles wait).
struct MoeOrderPrediction {
  MoeOrderOutcome wave, interleaved;
  double predicted_speedup = 1.0;  // wave makespan / interleaved makespan
  MoeOrder choice = MoeOrder::kExpertWave;
};
// The tile kind of a MoE stage (1: Linear-1, 2: Linear-2) in timelines, simulated and measured: "L1", "L2".
const char* moe_stage_name(int stage);
// With `timeline`, the simulations record their timelines there (SimResult::timeline; wave first), for traces.
struct MoeOrderTimelines {
  SimResult wave, interleaved;
  int producers = 0;  // CTAs; with roles the schedules hold 2 × producers (producer roles, then issuers)
};
MoeOrderPrediction predict_moe_orders(const model::Platform& platform, const MoeOrderParams& params,
                                      const MoeTileCosts& costs, MoeOrderTimelines* timeline = nullptr);
// The order for a fused MoE layer as the kernel would run it (`xstage moe bench --schedule auto`, the library's
// schedule "auto"): the layer's dimensions and launch (grid = producers = 2·G CTAs, the interleaved lead and
// the wave's experts per wave as the kernel resolved them), `received_per_expert` the tokens each global
// expert receives over all ranks, the mainloop rate the platform's at `precision` unless sm_flop_per_s > 0.
// The largest makespan over the ranks decides, as the slowest rank ends the layer.
struct MoeScheduleQuery {
  int hidden = 0, h_inter = 0, experts = 0, top_k = 0;
  int ranks = 1;
  int grid = 0;
  int lead_rows = 1, experts_per_wave = 1;
  std::string precision = "bf16";  // "bf16" or "fp8": the platform's GEMM rate
  double sm_flop_per_s = 0;        // > 0: overrides that rate
  MoeCombineModel combine = MoeCombineModel::kPiggyback;
};
struct MoeSchedulePrediction {
  MoeOrder choice = MoeOrder::kInterleaved;
  double predicted_speedup = 1.0;  // slowest rank's wave makespan / slowest rank's interleaved makespan
  double wave_makespan_s = 0, interleaved_makespan_s = 0;
  double sm_flop_per_s = 0;
  std::string rate_source;
  std::vector<MoeOrderPrediction> ranks;
};
MoeSchedulePrediction predict_moe_schedule(const model::Platform& platform, const MoeScheduleQuery& q,
                                           const std::vector<long long>& received_per_expert);
// Balanced routing: tokens_per_rank · ranks · top_k slots spread over the experts as evenly as integers allow
// (the first `remainder` experts one more).
std::vector<long long> balanced_expert_load(long long tokens_per_rank, int ranks, int experts, int top_k);

// Times in us: makespan_us, total_stall_us, median_tile_stall_us, max_tile_stall_us,
// peak_outstanding_bytes, dependency_wait_us; with roles also l2_tiles, median_tile_span_us,
// median_mma_stall_us, mean_mma_stall_us.
nlohmann::json to_json(const MoeOrderOutcome& o);

}  // namespace xstage::sim
