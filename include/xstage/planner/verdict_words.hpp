// The verdict words of the planner (`xstage plan`, `simulate --kernel`, their JSON and the C ABI): eq. 10's
// verdict with the bound(s) that fail, and what a kernel engineer acts on.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "xstage/model/burst_gap.hpp"
#include "xstage/sim/design_check.hpp"

namespace xstage::planner {

// keep: leave the bursts where they are, the next mainloop covers the drain (eq. 10's action when both bounds
// hold, model::to_string of DesignAction); reshape: the stores stall and the schedule must change. "Piggyback"
// names only an issue mode (the fused MoE kernel's `--combine piggyback`, a burst-gap description's
// `issue: "piggyback"`), never a verdict.
inline constexpr const char* kKeep = "keep";
inline constexpr const char* kReshape = "reshape";
// Eq. 10's verdict in these words with the bound(s) that fail ("reshape (rate, capacity)"), so a reshape is never
// printed without its reason.
std::string verdict_text(const model::DesignVerdict& v);

// What a kernel engineer acts on: the as-built verdict in words, its cost per launch and its stall per
// recurring unit (an output burst, a Linear-2 tile, a tile of a burst-gap kernel).
struct ActOn {
  const char* verdict = kKeep;
  std::string text;
  double first_launch_cost_s = 0.0;
  double steady_stall_s = 0.0;
  std::string stall_unit;
  bool datasheet_rate = false;
};
nlohmann::json to_json(const ActOn& a);
// The first burst stalls beyond the simulator's tolerance (sim::classify_recurring_stalls's own test).
bool first_burst_stalls(const sim::RecurringBurstCheck& b);
std::string launch_cost_clause(double first_s);
// An as-built check in words: "keep: stores drain under <cover>[; each launch pays X us once ...]" or
// "reshape: steady stall X us per <unit> (rate bound)".
ActOn act_on(const sim::RecurringBurstCheck& b, const std::string& unit, const std::string& cover);
// An as-built check's figures under stable keys (action, binding_bound, first_burst_stall_us, steady_stall_us,
// stall_tolerance_us).
nlohmann::json as_built_json(const sim::RecurringBurstCheck& b);

}  // namespace xstage::planner
