// Turns MoE tile orders (include/xstage/sched/moe_schedule.hpp) into simulator schedules, so the
// expert-wave and interleaved orders can be compared on a platform before a kernel runs.
#pragma once

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
};

// One producer per worker: Linear-1 → compute; Linear-2 → compute, then its Combine burst.
ProducerSchedule moe_producer_schedule(const std::vector<sched::MoeTile>& order, const MoeTileCosts& costs);

enum class MoeOrder { kExpertWave, kInterleaved };

struct MoeOrderParams {
  std::vector<int> rows_per_expert;  // scheduler rows of each local expert (routing)
  int n1 = 0, n2 = 0;                // N-tiles per row, even
  int instances = 1;                 // G: CTA pairs; producers = 2·G
  int lead_rows = 1;                 // D (interleaved)
  int experts_per_wave = 1;          // expert-wave
};

// All producers' orders for one policy (2·G workers: instance g, role r at index 2g + r).
std::vector<std::vector<sched::MoeTile>> moe_orders(MoeOrder order, const MoeOrderParams& params);

const char* to_string(MoeOrder order);  // "wave", "interleaved"

// The expert-wave order's default wave: a quarter of the local experts (at least one).
int default_experts_per_wave(int local_experts);

// Scheduler rows of each local expert of `rank` from the per-expert token counts summed over all
// source ranks (global expert index; expert e lives on rank e / (E / ranks)).
std::vector<int> rows_per_local_expert(const std::vector<long long>& received_per_expert, int ranks, int rank,
                                       int block_m);

// Tile costs of the model's MoE input on a platform (T_iss0 at the aligned producer count 2·instances).
MoeTileCosts moe_tile_costs(const model::Platform& platform, const model::MoeInput& in, int instances);

// One order through the event simulator.
struct MoeOrderOutcome {
  double makespan_s = 0, total_stall_s = 0, median_tile_stall_s = 0, max_tile_stall_s = 0;
  double peak_outstanding_bytes = 0;
};
// Both orders for one routing, and the choice (`xstage plan moe --simulate`, `xstage moe bench
// --schedule auto`): interleaved when its predicted makespan is shorter, otherwise expert-wave.
struct MoeOrderPrediction {
  MoeOrderOutcome wave, interleaved;
  double predicted_speedup = 1.0;  // wave makespan / interleaved makespan
  MoeOrder choice = MoeOrder::kExpertWave;
};
MoeOrderPrediction predict_moe_orders(const model::Platform& platform, const MoeOrderParams& params,
                                      const MoeTileCosts& costs);

}  // namespace xstage::sim
