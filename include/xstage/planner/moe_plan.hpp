// The MoE design test of one kernel description on a platform (`xstage plan moe`, xstage.planner.plan_moe):
// the audit's tile-level input with where each mainloop comes from, rank 0's routed rows, and both tile orders
// through the event simulator with the description's roles; and `plan moe` as a planner function: its request (the
// command's arguments by their snake_case names), its checks and its result with the JSON the CLI prints with
// --json, from which the CLI prints its tables. The C ABI (planner_c_api.h), the Python planner and the CLI call it.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "xstage/model/audit.hpp"
#include "xstage/model/kernel_description.hpp"
#include "xstage/model/platform.hpp"
#include "xstage/planner/plan.hpp"
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

// ---- plan moe: one MoE layer's Combine (eq. 12-16), and with `simulate` both tile orders --------------------
// A kernel description (`kernel` or `shape`: a built-in name or an xstage.kernel/1 file) with the arguments named
// after its fields laid over it (unset: the description's value), or one given by hidden, h_inter, experts and
// top_k; else the tile-level form (tile_bytes, n1, n2, t_l1_us, t_l2_us, h_inter) for the closed form only.
// The CLI's --trace and --force (an output file) are not part of a request.
struct PlanMoeRequest {
  std::string platform;  // empty: the embedded platform
  int producers = 0;     // 0: the platform's largest measured K
  std::optional<std::string> kernel, shape;  // a built-in name or a description file (one of the two)
  std::optional<std::string> precision, routing, combine;
  std::optional<int> hidden, h_inter, experts, top_k, ranks, block_m, block_n, out_bytes, cover_slots, lead_rows,
      experts_per_wave;
  std::optional<long long> tokens;
  std::optional<double> t_l1_us, t_l2_us, sm_tflops, staging_us, zipf_s;
  std::optional<double> tile_bytes, n1, n2;  // the tile-level form
  bool simulate = false;

  // The named description ("" where none) and the argument that named it ("kernel" or "shape").
  std::string kernel_name() const { return kernel ? *kernel : shape.value_or(""); }
  const char* kernel_key() const { return kernel ? "kernel" : "shape"; }
  // The description form: a named description or any of hidden, experts, top_k.
  bool described() const { return !kernel_name().empty() || hidden || experts || top_k; }
  // The description fields the arguments give (field -> value): every field of the parser's key list
  // (model::moe_kernel_fields()) that is an argument, if given; an integer 0 (lead_rows, experts_per_wave: the
  // default) left out.
  nlohmann::json fields() const;
};
// Reads a request, each value checked with the rule of the CLI's flag of the same name, in the order of the CLI's
// options. Throws RequestError naming the argument.
PlanMoeRequest plan_moe_request(const nlohmann::json& request);
// The CLI's checks after its options', in its order: kernel and shape exclude each other, precision and combine
// are choices, then the arguments that have no effect in the combination given (those of the tile-level form with
// a description, the description's with the tile-level form, the simulation's without `simulate`). Throws
// InputError naming the arguments (`flag_names`: the CLI's flags, --tile-bytes, instead of the keys).
void check_plan_moe(const PlanMoeRequest& r, bool flag_names = false);
// The description the request gives (described() only): the arguments as fields over the named description.
model::MoeKernel plan_moe_kernel(const PlanMoeRequest& r, bool flag_names = false);

struct PlanMoeResult {
  model::Platform platform;
  int producers = 0;                       // K
  std::optional<model::MoeKernel> kernel;  // the description form
  std::optional<MoePlanInput> described;   // its audit input and where each mainloop comes from
  bool datasheet_rate = false;             // a mainloop is estimated at the datasheet Tensor Core rate
  model::MoeInput input;                   // the audit's input (the description's or the tile-level form's)
  model::MoeAudit audit;
  MoeAsBuilt as_built;  // the description's ranks and Combine (the tile-level form: the arguments or the default)
  MoeVerdict verdict;
  nlohmann::json simulated;  // with simulate: both orders (simulate_moe_orders), else null
  nlohmann::json json;       // xstage.plan.moe/1
};
// The first half of plan_moe, what the CLI checks its output file against: the platform, K and the description
// with its audit input (the request checked by check_plan_moe before).
PlanMoeResult plan_moe_inputs(const PlanMoeRequest& r, bool flag_names = false);
// The second half: the audit, both orders' as-built verdict, with `simulate` both orders simulated (their
// timelines into `timelines` where given, for a trace) and the JSON.
void plan_moe_audit(const PlanMoeRequest& r, PlanMoeResult& out, sim::MoeOrderTimelines* timelines = nullptr);
// check_plan_moe, plan_moe_inputs and plan_moe_audit.
PlanMoeResult plan_moe(const PlanMoeRequest& r, bool flag_names = false);
inline nlohmann::json plan_moe_output(const nlohmann::json& request) {
  return plan_moe(plan_moe_request(request)).json;
}

}  // namespace xstage::planner
