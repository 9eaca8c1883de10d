// Schedule files for `xstage simulate --schedule` (schema "xstage.schedule/1"): what each producer
// does, as compute spans and remote-store bursts, so any kernel's tile order can be evaluated.
//
// {"schema": "xstage.schedule/1",
//  "producers": [
//    {"count": 132, "repeat": 20, "steps": [{"burst_bytes": 32768}, {"compute_us": 3.5}]},
//    {"count": 1, "steps": [{"compute_us": 1.0}, {"burst_bytes": 65536, "issue_floor_us": 0.9}]}]}
// "count" (default 1) identical producers run "repeat" (default 1) copies of "steps". A burst's
// issue floor defaults to the platform's T_iss0 at (total producers, burst bytes).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "xstage/model/platform.hpp"
#include "xstage/sim/simulator.hpp"

namespace xstage::sim {

inline constexpr std::string_view kScheduleSchema = "xstage.schedule/1";
// count x repeat x steps summed over the groups: larger schedules are refused (memory of the expansion).
inline constexpr long long kMaxScheduleSteps = 10'000'000;

// Throws xstage::InputError naming the field (e.g. "producers[1].steps[0].compute_us") and the value.
std::vector<ProducerSchedule> schedules_from_json(const nlohmann::json& j, const model::Platform& platform,
                                                  std::string_view origin);
std::vector<ProducerSchedule> load_schedule_file(const std::string& path, const model::Platform& platform);

}  // namespace xstage::sim
