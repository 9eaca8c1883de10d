#include "xstage/sim/schedule_file.hpp"

#include <cmath>
#include <optional>

#include "xstage/model/error.hpp"
#include "xstage/model/input_file.hpp"
#include "xstage/model/units.hpp"

namespace xstage::sim {

using nlohmann::json;

namespace {

[[noreturn]] void fail(std::string_view origin, const std::string& field, const std::string& what) {
  input_fail(origin, field, what);
}

double number(const json& obj, const char* key, std::string_view origin, const std::string& where, const Range& r) {
  return json_number_in(obj.at(key), origin, where + "." + key, r);
}

int count_field(const json& obj, const char* key, std::string_view origin, const std::string& where, int max) {
  auto it = obj.find(key);
  if (it == obj.end()) return 1;
  return static_cast<int>(json_integer_in(*it, origin, where + "." + key, IntRange{1, max}));
}

}  // namespace

std::vector<ProducerSchedule> schedules_from_json(const json& j, const model::Platform& platform, std::string_view origin) {
  if (!j.is_object()) fail(origin, "(top level)", "must be a JSON object, got " + bounded_json(j));
  auto schema = j.find("schema");
  if (schema == j.end()) fail(origin, "schema", "missing");
  if (!schema->is_string() || schema->get<std::string>() != kScheduleSchema)
    fail(origin, "schema", "unknown schema " + bounded_json(*schema) + " (expected \"" + std::string(kScheduleSchema) + "\")");
  for (const auto& [key, v] : j.items())
    if (key != "schema" && key != "producers" && key != "description") fail(origin, key, "unknown field");
  auto groups = j.find("producers");
  if (groups == j.end()) fail(origin, "producers", "missing");
  if (!groups->is_array() || groups->empty()) fail(origin, "producers", "must be a non-empty array, got " + bounded_json(*groups));

  // Totals are checked before anything is expanded, so a schedule's size is bounded.
  long long total = 0;
  for (std::size_t g = 0; g < groups->size(); ++g) {
    const std::string where = "producers[" + std::to_string(g) + "]";
    if (!(*groups)[g].is_object()) fail(origin, where, "must be an object, got " + bounded_json((*groups)[g]));
    total += count_field((*groups)[g], "count", origin, where, 100000);
    if (total > ranges::kProducers.hi)
      fail(origin, where + ".count", "producers of all groups must be at most " + std::to_string(ranges::kProducers.hi) +
                                         ", got " + std::to_string(total) + " up to this group");
  }
  long long total_steps = 0;
  std::vector<ProducerSchedule> out;
  for (std::size_t g = 0; g < groups->size(); ++g) {
    const json& grp = (*groups)[g];
    const std::string where = "producers[" + std::to_string(g) + "]";
    for (const auto& [key, v] : grp.items())
      if (key != "count" && key != "repeat" && key != "steps") fail(origin, where + "." + key, "unknown field");
    const int count = count_field(grp, "count", origin, where, 100000);
    const int repeat = count_field(grp, "repeat", origin, where, 1000000);
    auto steps = grp.find("steps");
    if (steps == grp.end()) fail(origin, where + ".steps", "missing");
    if (!steps->is_array() || steps->empty())
      fail(origin, where + ".steps", "must be a non-empty array, got " + bounded_json(*steps));
    // In double: count x repeat x steps can pass the range of int64.
    const double group_steps = static_cast<double>(count) * repeat * static_cast<double>(steps->size());
    if (group_steps > static_cast<double>(kMaxScheduleSteps - total_steps))
      fail(origin, where, "count x repeat x steps of all groups must be at most " + std::to_string(kMaxScheduleSteps) +
                              ", got " + std::to_string(total_steps) + " before this group and " + std::to_string(count) +
                              " x " + std::to_string(repeat) + " x " + std::to_string(steps->size()) + " in it");
    total_steps += static_cast<long long>(group_steps);
    ProducerSchedule one;
    for (std::size_t s = 0; s < steps->size(); ++s) {
      const json& st = (*steps)[s];
      const std::string sw = where + ".steps[" + std::to_string(s) + "]";
      if (!st.is_object()) fail(origin, sw, "must be an object, got " + bounded_json(st));
      const bool is_compute = st.contains("compute_us"), is_burst = st.contains("burst_bytes");
      if (is_compute == is_burst) fail(origin, sw, "needs exactly one of compute_us or burst_bytes");
      for (const auto& [key, v] : st.items())
        if (key != "compute_us" && key != "burst_bytes" && key != "issue_floor_us") fail(origin, sw + "." + key, "unknown field");
      if (is_compute) {
        if (st.contains("issue_floor_us")) fail(origin, sw + ".issue_floor_us", "only for bursts");
        one.push_back(Step::compute(units::us_to_s(number(st, "compute_us", origin, sw, ranges::kSpanUs))));
      } else {
        const double bytes = number(st, "burst_bytes", origin, sw, ranges::kBytes);
        const double floor_s = st.contains("issue_floor_us") ? units::us_to_s(number(st, "issue_floor_us", origin, sw, ranges::kTimeUs))
                                                             : platform.issue_floor_s(static_cast<int>(total), bytes).value;
        one.push_back(Step::burst(bytes, floor_s));
      }
    }
    ProducerSchedule repeated;
    repeated.reserve(one.size() * static_cast<std::size_t>(repeat));
    for (int r = 0; r < repeat; ++r) repeated.insert(repeated.end(), one.begin(), one.end());
    for (int c = 0; c < count; ++c) out.push_back(repeated);
  }
  return out;
}

std::vector<ProducerSchedule> load_schedule_file(const std::string& path, const model::Platform& platform) {
  return schedules_from_json(load_json_input(path, "schedule"), platform, path);
}

}  // namespace xstage::sim
