#include "xstage/planner/requests.hpp"

#include <cstdio>
#include <algorithm>
#include <filesystem>
#include <set>

#include "xstage/model/input_file.hpp"
#include "xstage/model/units.hpp"
#include "request_args.hpp"

#ifndef XSTAGE_PLANNER_VERSION
#error "XSTAGE_PLANNER_VERSION: the project version, defined by CMakeLists.txt"
#endif

namespace xstage::planner {

using detail::Args;
using detail::NumberRule;
using detail::kByteRule;
using detail::kDurationRule;
using detail::kMaxGapUs;
using detail::kProducerRule;

const char* version() { return XSTAGE_PLANNER_VERSION; }

std::string platform_source(const std::string& path) {
  if (path.empty()) return "embedded";
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::absolute(path, ec);
  return ec ? path : abs.lexically_normal().string();
}

void stamp_output(nlohmann::json& j, const std::string& schema) {
  j["schema"] = schema;
  j["version"] = version();
}

void stamp_output(nlohmann::json& j, const std::string& schema, const std::string& platform_path,
                  const model::Platform& platform) {
  stamp_output(j, schema);
  j["platform"] = {{"source", platform_source(platform_path)}, {"name", platform.name}};
}

int platform_max_producers(const model::Platform& p) {
  int k = 0;
  for (const auto& f : p.issue_floor) k = std::max(k, f.producers);
  return k;
}

ModelRequest model_request(const nlohmann::json& request) {
  Args a(request, "model");
  ModelRequest r;
  r.producers = Args::required(a.integer("producers", kProducerRule), "producers");
  r.bytes_per_producer = Args::required(a.number("bytes_per_producer", kByteRule), "bytes_per_producer");
  r.gap_us = a.number("gap_us", {false, false, std::pair{0.0, kMaxGapUs}}).value_or(0.0);
  r.t_iss0_us = a.number("t_iss0_us", kDurationRule);
  r.capacity_bytes = a.number("capacity_bytes", kByteRule);
  r.platform = a.existing_file("platform");
  a.done();
  return r;
}

model::BurstGapAudit model_audit(const ModelRequest& r, const model::Platform& platform) {
  model::BurstGapInput in{r.producers, r.bytes_per_producer, units::us_to_s(r.gap_us), std::nullopt, r.capacity_bytes};
  if (r.t_iss0_us) in.t_iss0_override_s = units::us_to_s(*r.t_iss0_us);
  return model::audit_burst_gap(platform, in);
}

nlohmann::json model_output(const ModelRequest& r) {
  const model::Platform platform = model::load_platform_or_default(r.platform);
  nlohmann::json j = model::to_json(model_audit(r, platform));
  stamp_output(j, "xstage.model/1", r.platform, platform);
  return j;
}

}  // namespace xstage::planner

namespace xstage::planner {

SimulateRequest simulate_request(const nlohmann::json& request) {
  Args a(request, "simulate");
  SimulateRequest r;
  // In the order of the CLI's options, whose checks run in that order.
  r.platform = a.existing_file("platform");
  r.schedule = a.existing_file("schedule");
  r.kernel = a.existing_file("kernel");
  const std::optional<int> producers = a.integer("producers", kProducerRule);
  const std::optional<double> bytes = a.number("bytes_per_producer", kByteRule);
  const std::optional<double> gap = a.number("gap_us", {false, false, std::pair{0.0, kMaxGapUs}});
  const std::optional<int> bursts = a.integer("bursts", {false, false, std::pair{2.0, 100000.0}});
  r.t_iss0_us = a.number("t_iss0_us", kDurationRule);
  r.capacity_bytes = a.number("capacity_bytes", kByteRule);
  r.completion_coupled = a.flag("completion_coupled");
  const std::optional<double> latency = a.number("latency_us", {false, true, std::pair{0.0, 1e6}});
  r.per_burst = a.flag("per_burst");
  a.done();
  r.producers = producers.value_or(0);
  r.bytes_per_producer = bytes.value_or(0.0);
  r.gap_us = gap.value_or(0.0);
  r.bursts = bursts.value_or(r.bursts);
  r.latency_us = latency.value_or(0.0);

  // Which arguments were given, in the CLI's option order, and what each one excludes (both ways, as the CLI's).
  const std::vector<std::pair<const char*, bool>> given = {
      {"platform", !r.platform.empty()},
      {"schedule", !r.schedule.empty()},
      {"kernel", !r.kernel.empty()},
      {"producers", producers.has_value()},
      {"bytes_per_producer", bytes.has_value()},
      {"gap_us", gap.has_value()},
      {"bursts", bursts.has_value()},
      {"t_iss0_us", r.t_iss0_us.has_value()},
      {"capacity_bytes", r.capacity_bytes.has_value()},
      {"completion_coupled", r.completion_coupled},
      {"latency_us", latency.has_value()},
      {"per_burst", r.per_burst}};
  const std::set<std::string> periodic = {"producers", "bytes_per_producer", "gap_us", "bursts", "t_iss0_us"};
  const std::set<std::string> kernel_excludes = {"capacity_bytes", "completion_coupled", "latency_us", "per_burst"};
  const auto excludes = [&](const std::string& x, const std::string& y) {
    const auto one_way = [&](const std::string& p, const std::string& q) {
      if (p == "schedule") return q == "kernel" || periodic.count(q) > 0;
      if (p == "kernel") return q == "schedule" || periodic.count(q) > 0 || kernel_excludes.count(q) > 0;
      return false;
    };
    return one_way(x, y) || one_way(y, x);
  };
  for (const auto& [name, is_given] : given) {
    if (!is_given) continue;
    if (std::string(name) == "latency_us" && !r.completion_coupled)
      throw RequestError("latency_us requires completion_coupled");
    for (const auto& [other, other_given] : given)
      if (other_given && excludes(name, other)) throw RequestError(std::string(name) + " excludes " + other);
  }
  return r;
}

}  // namespace xstage::planner
