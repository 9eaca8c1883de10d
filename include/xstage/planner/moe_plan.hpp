// The MoE design test of one kernel description on a platform (`xstage plan moe`, xstage.planner.plan_moe):
// the audit's tile-level input with where each mainloop comes from, rank 0's routed rows, and both tile orders
// through the event simulator with the description's roles.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "xstage/model/audit.hpp"
#include "xstage/model/kernel_description.hpp"
#include "xstage/model/platform.hpp"
#include "xstage/sim/moe_order_simulation.hpp"

namespace xstage::planner {

struct MoePlanInput {
  model::MoeInput input;   // tiles, mainloops, staging
  model::GemmRate rate;    // the rate an estimated mainloop uses (the description's sm_tflops, else the platform's)
  std::string t_l1_source, t_l2_source;  // "measured: ..." or "estimated: ... TFLOP/s per SM (source)"
  bool estimated() const { return t_l1_source.rfind("estimated", 0) == 0 || t_l2_source.rfind("estimated", 0) == 0; }
};
// `producers`: the aligned producer count K (the platform's largest measured K by default).
MoePlanInput moe_plan_input(const model::Platform& platform, const model::MoeKernel& k, int producers);

// Scheduler rows (block_m-token blocks) of rank 0's local experts when every rank routes `tokens` tokens
// (generated per rank, or the same routing file replayed by every rank). Refuses work past the simulator's
// limit before generating anything.
std::vector<int> rows_of_rank0(const model::MoeKernel& k);

// Both orders simulated for rank 0 with the description's issue roles; the JSON of `plan moe --simulate`
// (its "simulated" object). With `timelines`, the simulations' timelines for a trace.
nlohmann::json simulate_moe_orders(const model::Platform& platform, const model::MoeKernel& k, const MoePlanInput& in,
                                   int producers, sim::MoeOrderTimelines* timelines = nullptr);

}  // namespace xstage::planner
