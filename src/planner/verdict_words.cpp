// The verdict words of the planner (verdict_words.hpp).
#include "xstage/planner/verdict_words.hpp"

#include <cstdio>
#include <string_view>

#include "xstage/model/units.hpp"
#include "xstage/planner/text.hpp"

namespace xstage::planner {

std::string verdict_text(const model::DesignVerdict& v) {
  const char* why = !v.rate_bound_ok && !v.capacity_bound_ok ? " (rate, capacity)"
                    : !v.rate_bound_ok                       ? " (rate)"
                    : !v.capacity_bound_ok                   ? " (capacity)"
                                                             : "";
  return std::string(model::to_string(v.action)) + why;
}

nlohmann::json to_json(const ActOn& a) {
  return {{"verdict", a.verdict},
          {"text", a.text},
          {"first_launch_cost_us", units::s_to_us(a.first_launch_cost_s)},
          {"steady_stall_us", units::s_to_us(a.steady_stall_s)},
          {"stall_unit", a.stall_unit},
          {"datasheet_rate", a.datasheet_rate}};
}

bool first_burst_stalls(const sim::RecurringBurstCheck& b) {
  return std::string_view(b.binding_bound) != "none" || b.action == model::DesignAction::kReshape;
}

std::string launch_cost_clause(double first_s) {
  return "; each launch pays " + fmt_us(first_s, 2) + " us once (its first, aligned burst)";
}

ActOn act_on(const sim::RecurringBurstCheck& b, const std::string& unit, const std::string& cover) {
  ActOn a;
  a.stall_unit = unit;
  a.first_launch_cost_s = first_burst_stalls(b) ? b.first_burst_stall_s : 0.0;
  if (b.action == model::DesignAction::kReshape) {
    a.verdict = kReshape;
    a.steady_stall_s = b.steady_stall_s;
    a.text = "reshape: steady stall " + fmt_us(b.steady_stall_s, 2) + " us per " + unit + " (rate bound)";
  } else {
    a.text = "keep: stores drain under " + cover;
    if (a.first_launch_cost_s > 0.0) a.text += launch_cost_clause(a.first_launch_cost_s);
  }
  return a;
}

nlohmann::json as_built_json(const sim::RecurringBurstCheck& b) {
  return {{"action", model::to_string(b.action)},
          {"binding_bound", b.binding_bound},
          {"first_burst_stall_us", units::s_to_us(b.first_burst_stall_s)},
          {"steady_stall_us", units::s_to_us(b.steady_stall_s)},
          {"stall_tolerance_us", units::s_to_us(b.tolerance_s)}};
}

}  // namespace xstage::planner
