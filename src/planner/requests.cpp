#include "xstage/planner/requests.hpp"

#include <cstdio>
#include <algorithm>
#include <filesystem>
#include <set>

#include "xstage/model/input_file.hpp"
#include "xstage/model/units.hpp"

#ifndef XSTAGE_PLANNER_VERSION
#error "XSTAGE_PLANNER_VERSION: the project version, defined by CMakeLists.txt"
#endif

namespace xstage::planner {

namespace {

std::string fmt_g(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

// The value as the caller wrote it, bounded and escaped (xstage/model/bounded_text.hpp): a string's own text,
// anything else its JSON text.
std::string shown(const nlohmann::json& v) {
  return v.is_string() ? bounded_text(v.get_ref<const std::string&>()) : bounded_json(v);
}

// The rules of a number argument, in the order the CLI's flags check them.
struct NumberRule {
  bool positive = false;                  // "> 0"
  bool non_negative = false;              // ">= 0"
  std::optional<std::pair<double, double>> range;  // "in [lo, hi]"
};

// Reads the request's arguments by name; every name read is known, any other key is refused by done().
class Args {
 public:
  Args(const nlohmann::json& request, const char* command) : request_(request), command_(command) {
    if (!request_.is_object())
      throw RequestError(std::string(command) + ": the request must be a JSON object, got " + request_.type_name());
  }

  // The value under `key`, or nullptr where absent or null.
  const nlohmann::json* find(const std::string& key) {
    known_.insert(key);
    const auto it = request_.find(key);
    return it == request_.end() || it->is_null() ? nullptr : &*it;
  }

  std::optional<double> number(const std::string& key, const NumberRule& rule) {
    const nlohmann::json* v = find(key);
    if (!v) return std::nullopt;
    const bool is_number = v->is_number();
    const double x = is_number ? v->get<double>() : 0.0;
    if (rule.positive) {
      if (!is_number) throw RequestError(key + ": must be a finite number > 0, got \"" + shown(*v) + "\"");
      if (x <= 0) throw RequestError(key + ": must be > 0, got " + shown(*v));
    }
    if (rule.non_negative) {
      if (!is_number) throw RequestError(key + ": must be a finite number >= 0, got \"" + shown(*v) + "\"");
      if (x < 0) throw RequestError(key + ": must be >= 0, got " + shown(*v));
    }
    if (rule.range && (!is_number || x < rule.range->first || x > rule.range->second))
      throw RequestError(key + ": must be in [" + fmt_g(rule.range->first) + ", " + fmt_g(rule.range->second) +
                         "], got " + shown(*v));
    if (!is_number) throw RequestError(key + ": must be a finite decimal number, got \"" + shown(*v) + "\"");
    return x;
  }

  std::optional<int> integer(const std::string& key, const NumberRule& rule) {
    const nlohmann::json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_number_integer()) throw RequestError(key + ": must be a decimal integer, got \"" + shown(*v) + "\"");
    const std::optional<double> x = number(key, rule);
    return static_cast<int>(*x);
  }

  // A flag: true or false; false where absent.
  bool flag(const std::string& key) {
    const nlohmann::json* v = find(key);
    if (!v) return false;
    if (!v->is_boolean()) throw RequestError(key + ": must be true or false, got " + shown(*v));
    return v->get<bool>();
  }

  // A path that must name an existing file (not a folder); "" where absent.
  std::string existing_file(const std::string& key) {
    const nlohmann::json* v = find(key);
    if (!v) return {};
    if (!v->is_string()) throw RequestError(key + ": must be a path (a string), got " + shown(*v));
    const std::string path = v->get<std::string>();
    std::error_code ec;
    const auto st = std::filesystem::status(path, ec);
    if (ec || !std::filesystem::exists(st)) throw RequestError(key + ": File does not exist: " + bounded_text(path, 240));
    if (std::filesystem::is_directory(st))
      throw RequestError(key + ": File is actually a directory: " + bounded_text(path, 240));
    return path;
  }

  template <class T>
  static T required(const std::optional<T>& v, const std::string& key) {
    if (!v) throw RequestError(key + " is required");
    return *v;
  }

  void done() const {
    for (const auto& [key, value] : request_.items())
      if (!known_.count(key)) {
        std::string accepted;
        for (const auto& k : known_) accepted += (accepted.empty() ? "" : ", ") + k;
        throw RequestError(bounded_text(key) + ": no such argument of " + command_ + " (accepted: " + accepted + ")");
      }
  }

 private:
  const nlohmann::json& request_;
  std::string command_;
  std::set<std::string> known_;
};

constexpr double kMaxGapUs = 1e6;  // the CLI's --gap-us bound
const NumberRule kProducerRule{true, false, std::pair{double(ranges::kProducers.lo), double(ranges::kProducers.hi)}};
const NumberRule kByteRule{true, false, std::pair{ranges::kBytes.lo, ranges::kBytes.hi}};
const NumberRule kDurationRule{true, false, std::pair{0.0, 1e6}};

}  // namespace

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
