#include "xstage/sim/schedule_file.hpp"

#include <cmath>
#include <fstream>
#include <optional>

#include "xstage/model/error.hpp"
#include "xstage/model/units.hpp"

namespace xstage::sim {

using nlohmann::json;

namespace {

[[noreturn]] void fail(std::string_view origin, const std::string& field, const std::string& what) {
  throw InputError(std::string(origin) + ": " + field + ": " + what);
}

double number(const json& obj, const char* key, std::string_view origin, const std::string& where, bool allow_zero) {
  const json& v = obj.at(key);
  const std::string field = where + "." + key;
  if (!v.is_number()) fail(origin, field, "must be a number, got " + v.dump());
  const double x = v.get<double>();
  if (!std::isfinite(x) || (allow_zero ? x < 0 : x <= 0))
    fail(origin, field, std::string("must be ") + (allow_zero ? ">= 0" : "> 0") + ", got " + v.dump());
  return x;
}

int count_field(const json& obj, const char* key, std::string_view origin, const std::string& where, int max) {
  auto it = obj.find(key);
  if (it == obj.end()) return 1;
  if (!it->is_number_integer() || it->get<long long>() < 1 || it->get<long long>() > max)
    fail(origin, where + "." + key, "must be an integer in 1.." + std::to_string(max) + ", got " + it->dump());
  return it->get<int>();
}

}  // namespace

std::vector<ProducerSchedule> schedules_from_json(const json& j, const model::Platform& platform, std::string_view origin) {
  if (!j.is_object()) fail(origin, "(top level)", "must be a JSON object");
  auto schema = j.find("schema");
  if (schema == j.end()) fail(origin, "schema", "missing");
  if (!schema->is_string() || schema->get<std::string>() != kScheduleSchema)
    fail(origin, "schema", "unknown schema " + schema->dump() + " (expected \"" + std::string(kScheduleSchema) + "\")");
  for (const auto& [key, v] : j.items())
    if (key != "schema" && key != "producers" && key != "description") fail(origin, key, "unknown field");
  auto groups = j.find("producers");
  if (groups == j.end()) fail(origin, "producers", "missing");
  if (!groups->is_array() || groups->empty()) fail(origin, "producers", "must be a non-empty array");

  int total = 0;
  for (std::size_t g = 0; g < groups->size(); ++g) {
    const std::string where = "producers[" + std::to_string(g) + "]";
    if (!(*groups)[g].is_object()) fail(origin, where, "must be an object");
    total += count_field((*groups)[g], "count", origin, where, 100000);
  }
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
    if (!steps->is_array() || steps->empty()) fail(origin, where + ".steps", "must be a non-empty array");
    ProducerSchedule one;
    for (std::size_t s = 0; s < steps->size(); ++s) {
      const json& st = (*steps)[s];
      const std::string sw = where + ".steps[" + std::to_string(s) + "]";
      if (!st.is_object()) fail(origin, sw, "must be an object");
      const bool is_compute = st.contains("compute_us"), is_burst = st.contains("burst_bytes");
      if (is_compute == is_burst) fail(origin, sw, "needs exactly one of compute_us or burst_bytes");
      for (const auto& [key, v] : st.items())
        if (key != "compute_us" && key != "burst_bytes" && key != "issue_floor_us") fail(origin, sw + "." + key, "unknown field");
      if (is_compute) {
        if (st.contains("issue_floor_us")) fail(origin, sw + ".issue_floor_us", "only for bursts");
        one.push_back(Step::compute(units::us_to_s(number(st, "compute_us", origin, sw, true))));
      } else {
        const double bytes = number(st, "burst_bytes", origin, sw, false);
        const double floor_s = st.contains("issue_floor_us") ? units::us_to_s(number(st, "issue_floor_us", origin, sw, false))
                                                             : platform.issue_floor_s(total, bytes).value;
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
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot open schedule file");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::parse_error& e) {
    throw InputError(path + ": not valid JSON: " + e.what());
  }
  return schedules_from_json(j, platform, path);
}

}  // namespace xstage::sim
