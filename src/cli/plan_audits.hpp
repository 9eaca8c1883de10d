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
#include "xstage/planner/moe_plan.hpp"
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

// `plan moe`'s options: the planner's request (xstage/planner/moe_plan.hpp; its platform and producers are
// PlanCommon's) and what only the CLI does, writing both orders' simulated timelines as a trace (--trace FILE,
// --force).
struct MoeOptions {
  planner::PlanMoeRequest request;
  std::string trace;
  bool force = false;
};

// `plan attn`: one attention kernel's epilogue All-to-All (eq. 17-20).
void run_attn(const PlanCommon& c, const AttnOptions& o);
// `plan moe`: one MoE layer's Combine (eq. 12-16), and with --simulate both tile orders.
void run_moe(const PlanCommon& c, const MoeOptions& o);
// `plan` alone: every built-in workload on the platform, aligned (eq. 10) and as built (simulated).
void run_default(const PlanCommon& c);

}  // namespace xstage::cli::plan
