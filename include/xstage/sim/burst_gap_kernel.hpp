// A burst–gap kernel description (model::BurstGapKernel, kind "burst_gap") through the event simulator: its
// schedules (tile_schedules.hpp, the code path of the MoE layer's), per tile kind the simulated stalls and the
// design test, and the makespan against the same schedules with no backpressure (`xstage simulate --kernel`).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "xstage/model/burst_gap.hpp"
#include "xstage/model/kernel_description.hpp"
#include "xstage/model/platform.hpp"
#include "xstage/sim/design_check.hpp"
#include "xstage/sim/simulator.hpp"
#include "xstage/sim/tile_schedules.hpp"

namespace xstage::sim {

// The kernel's schedules on `producers` CTAs: every producer runs repeat × tiles in order; a tile stores
// bytes × remote_share, its issue floor T_iss0 at (producers, burst bytes) on the platform (a piggybacked
// chunk's at the chunk's bytes). TileRef::tag is the tile's index in kernel.tiles.
TileSchedules burst_gap_schedules(const model::Platform& platform, const model::BurstGapKernel& kernel, int producers);
// The schedule steps the kernel becomes on `producers` CTAs (an upper bound, tile_schedule_steps).
double burst_gap_schedule_steps(const model::BurstGapKernel& kernel, int producers);
// Refuses (InputError naming `origin`) a kernel whose schedules would exceed kMaxScheduleSteps on `producers`.
void check_burst_gap_work(const model::BurstGapKernel& kernel, int producers, std::string_view origin);

struct BurstGapKindOutcome {
  std::string name;
  int tiles = 0;                  // tiles of this kind simulated, all producers
  double burst_bytes = 0;         // per burst and producer (a chunk's when piggybacked; 0: nothing remote)
  double t_iss0_s = 0;            // the burst's issue floor
  double gap_s = 0;               // eq. 10's gap after the burst, no stall (the tightest over the kind's tiles)
  double median_stall_s = 0, max_stall_s = 0;  // per tile: its bursts' issue time beyond their floors
  // With an epilogue issuer: per tile the producer's wait for a free slot at the tile's entry (eq. 15's
  // [T_RS − T_cover]+) and the store span T_RS on the issuer (staging + issue).
  double median_slot_wait_s = 0, max_slot_wait_s = 0, median_span_s = 0;
  model::DesignVerdict aligned{};  // eq. 10 of the aligned burst (all producers at once), context
  // The as-built verdict from the simulated stalls of the kernel's own schedule (what the producer loses: burst
  // stall, or the slot wait with an epilogue issuer): its first tile (median producer) and the mean per tile
  // over the second half of the repeats (over the tiles after the first when repeat is 1).
  RecurringBurstCheck as_built{};
};

struct BurstGapOutcome {
  int producers = 0;
  double drain_rate_bytes_per_s = 0, capacity_bytes = 0;
  double makespan_s = 0;
  double free_makespan_s = 0;  // the same schedules with no backpressure (every burst at its floor)
  // The producer's stall per repeat of the tile list (median producer; mean over the second half of the repeats,
  // the one repeat when repeat is 1): burst stall, or with an epilogue issuer the slot waits.
  double steady_stall_per_period_s = 0;
  double total_stall_s = 0, peak_outstanding_bytes = 0;
  std::vector<BurstGapKindOutcome> kinds;  // in order of first appearance of each tile name
};

// R(K) and Q(K) of the platform, its drain ramp, first-come service. `timeline`: the simulation's result with
// its timeline recorded (for --trace).
BurstGapOutcome simulate_burst_gap_kernel(const model::Platform& platform, const model::BurstGapKernel& kernel,
                                          int producers, SimResult* timeline = nullptr);

}  // namespace xstage::sim
