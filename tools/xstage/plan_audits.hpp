// The audits behind `xstage plan`: the option sets of its three forms and the functions that run them
// (cmd_plan.cpp declares the options and calls these).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli_common.hpp"
#include "xstage/model/kernel_description.hpp"
#include "xstage/model/units.hpp"
#include "xstage/model/workloads.hpp"
#include "xstage/planner/plan.hpp"
#include "xstage/planner/verdict_words.hpp"
#include "xstage/sim/design_check.hpp"

namespace xstage::cli::plan {

// ---- the verdict words of `plan`, shared with `simulate --kernel` (xstage/planner/verdict_words.hpp) -------------
using planner::ActOn;
using planner::act_on;
using planner::as_built_json;
using planner::first_burst_stalls;
using planner::kKeep;
using planner::kReshape;
using planner::launch_cost_clause;
using planner::to_json;
using planner::verdict_text;

// ---- the planner's design tests (xstage/planner/plan.hpp), whose tables these print -------------------------
using planner::attention_act_on;
using planner::kAttentionLegend;
using planner::kMoeLegend;
using planner::kPlanRanks;
using planner::LegendLine;
using planner::moe_verdict;
using planner::MoeAsBuilt;
using planner::MoeVerdict;
using planner::stall_pair;

// Text cells read left to right: pad the given columns and their headers to one width (print_table right-aligns
// every column but the first, which suits the numbers).
void left_align(std::vector<std::string>& header, std::vector<std::vector<std::string>>& rows,
                std::initializer_list<std::size_t> columns);

struct PlanCommon {
  std::string platform;
  int producers = 0;  // 0: the platform's largest measured K
  bool json = false;
};

// `plan attn`'s options: the planner's request (its platform and producers are PlanCommon's).
using AttnOptions = planner::PlanAttnRequest;

// `plan moe`: a kernel description (xstage/model/kernel_description.hpp) from --kernel/--shape and the flags laid
// over it (each flag is the description's field of the same name; unset: the description's value), or the
// tile-level form (--tile-bytes, --n1, --n2 and the mainloops) for the closed form only.
struct MoeOptions {
  std::string shape;   // --shape or --kernel: a built-in name or a description file
  std::string shape_flag = "--shape";
  std::optional<std::string> precision, routing, combine;
  std::optional<int> hidden, h_inter, experts, top_k, ranks, block_m, block_n, out_bytes, cover_slots, lead_rows,
      experts_per_wave;
  std::optional<long long> tokens;
  std::optional<double> t_l1_us, t_l2_us, sm_tflops, staging_us, zipf_s;
  std::optional<double> tile_bytes, n1, n2;  // the tile-level form
  bool simulate = false;
  std::string trace;   // --trace FILE (with --simulate): the simulated timelines of both orders
  bool force = false;
  // The description fields the flags give (field → value): the options named after the parser's fields
  // (model::moe_kernel_fields(), "h_inter" is --h-inter), as description_fields reads them from the command.
  nlohmann::json fields = nlohmann::json::object();
  // The description form: --kernel/--shape or any of --hidden, --experts, --top-k.
  bool described() const { return !shape.empty() || hidden || experts || top_k; }
};
// The description the options give (described() only): the flags as fields over the named description.
model::MoeKernel moe_kernel(const MoeOptions& o);
// MoeOptions::fields of a parsed `plan moe` command: for every field of the parser's key list, the option of the
// same name with dashes, if given, with its value as the option's type (an integer 0: the default, left out).
nlohmann::json description_fields(const CLI::App& cmd);

// `plan attn`: one attention kernel's epilogue All-to-All (eq. 17-20).
void run_attn(const PlanCommon& c, const AttnOptions& o);
// `plan moe`: one MoE layer's Combine (eq. 12-16), and with --simulate both tile orders.
void run_moe(const PlanCommon& c, const MoeOptions& o);
// `plan` alone: every built-in workload on the platform, aligned (eq. 10) and as built (simulated).
void run_default(const PlanCommon& c);

}  // namespace xstage::cli::plan
