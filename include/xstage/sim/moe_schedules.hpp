// Turns MoE tile orders (include/xstage/sched/moe_schedule.hpp) into simulator schedules, so the
// expert-wave and interleaved orders can be compared on a platform before a kernel runs.
#pragma once

#include <vector>

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

}  // namespace xstage::sim
