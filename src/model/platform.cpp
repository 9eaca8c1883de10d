#include "xstage/model/platform.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "xstage/model/error.hpp"
#include "xstage/model/input_file.hpp"
#include "xstage/model/units.hpp"

namespace xstage::model {

using nlohmann::json;

const char* to_string(LookupSource s) {
  switch (s) {
    case LookupSource::kMeasured: return "measured";
    case LookupSource::kInterpolated: return "interpolated";
    case LookupSource::kExtrapolated: return "extrapolated";
    case LookupSource::kScaled: return "scaled";
    case LookupSource::kOverride: return "override";
  }
  return "?";
}

namespace {

[[noreturn]] void fail(std::string_view origin, const std::string& field, const std::string& what) {
  input_fail(origin, field, what);
}

std::string show(const json& v) { return bounded_json(v); }

void reject_unknown_keys(const json& obj, const std::set<std::string>& known, std::string_view origin,
                         const std::string& where) {
  for (const auto& [key, value] : obj.items()) {
    if (!known.count(key)) fail(origin, where.empty() ? key : where + "." + key, "unknown field");
  }
}

const json& require(const json& obj, const std::string& key, std::string_view origin, const std::string& field) {
  auto it = obj.find(key);
  if (it == obj.end()) fail(origin, field, "missing");
  return *it;
}

// A required number within its accepted range (xstage/model/input_file.hpp names them all).
double number(const json& obj, const std::string& key, std::string_view origin, const std::string& field, const Range& r) {
  return json_number_in(require(obj, key, origin, field), origin, field, r);
}

int producer_count(const json& obj, std::string_view origin, const std::string& field) {
  return static_cast<int>(json_integer_in(require(obj, "producers", origin, field), origin, field, ranges::kProducers));
}

// Nearest measured K on a log scale (ties: the larger K).
int nearest_producers(const std::set<int>& ks, int k) {
  int best = *ks.begin();
  double best_d = std::fabs(std::log(static_cast<double>(best)) - std::log(static_cast<double>(k)));
  for (int cand : ks) {
    const double d = std::fabs(std::log(static_cast<double>(cand)) - std::log(static_cast<double>(k)));
    if (d < best_d || (d == best_d && cand > best)) best = cand, best_d = d;
  }
  return best;
}

double lerp(double x0, double y0, double x1, double y1, double x) { return y0 + (y1 - y0) * (x - x0) / (x1 - x0); }

}  // namespace

Lookup Platform::issue_floor_s(int producers, double bytes_per_producer) const {
  if (issue_floor.empty()) throw InputError("platform " + name + ": issue_floor: no measured points");
  std::set<int> ks;
  for (const auto& p : issue_floor) ks.insert(p.producers);
  const int k = nearest_producers(ks, producers);
  std::vector<std::pair<double, double>> pts;  // (B, t) at K'
  for (const auto& p : issue_floor)
    if (p.producers == k) pts.emplace_back(p.bytes_per_producer, p.t_iss0_s);
  std::sort(pts.begin(), pts.end());
  const bool same_k = (k == producers);
  for (const auto& [b, t] : pts)
    if (b == bytes_per_producer) return {t, same_k ? LookupSource::kMeasured : LookupSource::kInterpolated};
  if (pts.size() == 1) {
    // One point: constant per-producer issue rate.
    return {pts[0].second * bytes_per_producer / pts[0].first, LookupSource::kScaled};
  }
  const double b = bytes_per_producer;
  if (b > pts.front().first && b < pts.back().first) {
    auto hi = std::upper_bound(pts.begin(), pts.end(), std::make_pair(b, -1.0));
    auto lo = hi - 1;
    return {lerp(lo->first, lo->second, hi->first, hi->second, b), LookupSource::kInterpolated};
  }
  if (b < pts.front().first) {
    // Below the range: the first segment's line, but never below proportional scaling of the
    // smallest point (a non-negative fixed cost makes that a lower bound).
    const double proportional = pts.front().second * b / pts.front().first;
    return {std::max(lerp(pts[0].first, pts[0].second, pts[1].first, pts[1].second, b), proportional),
            LookupSource::kExtrapolated};
  }
  const auto& a = pts[pts.size() - 2];
  const auto& c = pts[pts.size() - 1];
  return {lerp(a.first, a.second, c.first, c.second, b), LookupSource::kExtrapolated};
}

Lookup Platform::capacity_bytes(int producers) const {
  if (capacity.empty()) throw InputError("platform " + name + ": capacity: no measured points");
  std::vector<std::pair<int, double>> pts;
  for (const auto& c : capacity) pts.emplace_back(c.producers, c.bytes);
  std::sort(pts.begin(), pts.end());
  for (const auto& [k, q] : pts)
    if (k == producers) return {q, LookupSource::kMeasured};
  const bool below = producers < pts.front().first, above = producers > pts.back().first;
  if (below || above) {
    // Outside the measured K: with one point, Q is held (nothing says how it scales). With two or more,
    // the per-producer capacity q(K) = Q(K)/K follows the end segment's line (each producer's share of the
    // outstanding stores, which the knees of every K put near the same B), and the aggregate stays
    // monotone: more producers never hold less in all than the largest K measured, fewer never more than
    // the smallest (docs/platform.md).
    if (pts.size() == 1) return {pts.front().second, LookupSource::kExtrapolated};
    const auto& a = below ? pts[0] : pts[pts.size() - 2];
    const auto& c = below ? pts[1] : pts[pts.size() - 1];
    const double qa = a.second / a.first, qc = c.second / c.first;
    const auto& e = below ? pts.front() : pts.back();
    const double end = e.second;
    double q = lerp(a.first, qa, c.first, qc, producers) * producers;
    if (!(q > 0.0)) q = end / e.first * producers;  // a line that crosses zero: the end point's share
    return {below ? std::min(q, end) : std::max(q, end), LookupSource::kExtrapolated};
  }
  auto hi = std::upper_bound(pts.begin(), pts.end(), std::make_pair(producers, -1.0));
  auto lo = hi - 1;
  return {lerp(lo->first, lo->second, hi->first, hi->second, producers), LookupSource::kInterpolated};
}

namespace {
// Linear in K between (K, y) points, clamped to the end points outside.
double lerp_in_producers(std::vector<std::pair<int, double>> pts, int producers) {
  std::sort(pts.begin(), pts.end());
  if (producers <= pts.front().first) return pts.front().second;
  if (producers >= pts.back().first) return pts.back().second;
  auto hi = std::upper_bound(pts.begin(), pts.end(), std::make_pair(producers, -1.0));
  auto lo = hi - 1;
  return lerp(lo->first, lo->second, hi->first, hi->second, producers);
}
}  // namespace

double Platform::drain_rate_at(int producers) const {
  if (drain_rate_by_producers.empty()) return drain_rate_bytes_per_s;
  std::vector<std::pair<int, double>> pts;
  for (const auto& d : drain_rate_by_producers) pts.emplace_back(d.producers, d.bytes_per_s);
  return lerp_in_producers(pts, producers);
}

double Platform::isolated_drain_rate_at(int producers) const {
  std::vector<std::pair<int, double>> pts;
  for (const auto& c : capacity)
    if (c.isolated_drain_rate_bytes_per_s > 0.0) pts.emplace_back(c.producers, c.isolated_drain_rate_bytes_per_s);
  return pts.empty() ? drain_rate_at(producers) : lerp_in_producers(pts, producers);
}

GemmRate Platform::gemm_rate_at(std::string_view precision) const {
  if (precision != "bf16" && precision != "fp8")
    throw InputError("precision: must be bf16 or fp8, got \"" + std::string(precision) + "\"");
  for (const auto& g : gemm_rate_per_sm)
    if (g.precision == precision) return {g.flop_per_s_per_sm, g.source};
  return {precision == "bf16" ? kDatasheetSmFlopPerS : kDatasheetFp8SmFlopPerS, "datasheet"};
}

Platform platform_from_json(const json& j, std::string_view origin) {
  if (!j.is_object()) fail(origin, "(top level)", "must be a JSON object, got " + show(j));
  const json& schema = require(j, "schema", origin, "schema");
  if (!schema.is_string() || schema.get<std::string>() != kPlatformSchema)
    fail(origin, "schema", "unknown schema " + show(schema) + " (expected \"" + std::string(kPlatformSchema) + "\")");
  reject_unknown_keys(j, {"schema", "name", "description", "drain_rate_gbps", "issue_floor", "capacity", "provenance",
                          "drain_rate_by_producers", "knee_ramp_us", "burst_overhead_us", "zero_gap_overhead_us",
                          "local_drain_rate_gbps", "gemm_rate_per_sm", "physical_bounds"},
                      origin, "");
  Platform p;
  const json& name = require(j, "name", origin, "name");
  if (!name.is_string() || name.get_ref<const std::string&>().empty() || name.get_ref<const std::string&>().size() > 256)
    fail(origin, "name", "must be a string of 1..256 bytes, got " + show(name));
  p.name = name.get<std::string>();
  if (auto it = j.find("description"); it != j.end()) {
    if (!it->is_string() || it->get_ref<const std::string&>().size() > 65536)
      fail(origin, "description", "must be a string of at most 65536 bytes, got " + show(*it));
    p.description = it->get<std::string>();
  }
  p.drain_rate_bytes_per_s = units::gbps_to_bytes_per_s(number(j, "drain_rate_gbps", origin, "drain_rate_gbps", ranges::kRateGbps));

  const json& floors = require(j, "issue_floor", origin, "issue_floor");
  if (!floors.is_array() || floors.empty()) fail(origin, "issue_floor", "must be a non-empty array, got " + show(floors));
  std::set<std::pair<int, double>> seen_floor;
  for (std::size_t i = 0; i < floors.size(); ++i) {
    const std::string where = "issue_floor[" + std::to_string(i) + "]";
    const json& e = floors[i];
    if (!e.is_object()) fail(origin, where, "must be an object, got " + show(e));
    reject_unknown_keys(e, {"producers", "bytes_per_producer", "t_iss0_us"}, origin, where);
    IssueFloorPoint pt{producer_count(e, origin, where + ".producers"),
                       number(e, "bytes_per_producer", origin, where + ".bytes_per_producer", ranges::kBytes),
                       units::us_to_s(number(e, "t_iss0_us", origin, where + ".t_iss0_us", ranges::kTimeUs))};
    if (!seen_floor.insert({pt.producers, pt.bytes_per_producer}).second)
      fail(origin, where, "duplicate point for producers " + std::to_string(pt.producers) + " and bytes_per_producer " +
                              show(e["bytes_per_producer"]));
    p.issue_floor.push_back(pt);
  }

  const json& caps = require(j, "capacity", origin, "capacity");
  if (!caps.is_array()) fail(origin, "capacity", "must be an array, got " + show(caps));
  std::set<int> seen_cap;
  for (std::size_t i = 0; i < caps.size(); ++i) {
    const std::string where = "capacity[" + std::to_string(i) + "]";
    const json& e = caps[i];
    if (!e.is_object()) fail(origin, where, "must be an object, got " + show(e));
    reject_unknown_keys(e, {"producers", "bytes", "drain_rate_gbps"}, origin, where);
    CapacityPoint pt{producer_count(e, origin, where + ".producers"), number(e, "bytes", origin, where + ".bytes", ranges::kBytes)};
    if (e.contains("drain_rate_gbps"))
      pt.isolated_drain_rate_bytes_per_s =
          units::gbps_to_bytes_per_s(number(e, "drain_rate_gbps", origin, where + ".drain_rate_gbps", ranges::kRateGbps));
    if (!seen_cap.insert(pt.producers).second)
      fail(origin, where, "duplicate point for producers " + std::to_string(pt.producers));
    p.capacity.push_back(pt);
  }

  if (auto it = j.find("drain_rate_by_producers"); it != j.end()) {
    if (!it->is_array()) fail(origin, "drain_rate_by_producers", "must be an array, got " + show(*it));
    std::set<int> seen;
    for (std::size_t i = 0; i < it->size(); ++i) {
      const std::string where = "drain_rate_by_producers[" + std::to_string(i) + "]";
      const json& e = (*it)[i];
      if (!e.is_object()) fail(origin, where, "must be an object, got " + show(e));
      reject_unknown_keys(e, {"producers", "drain_rate_gbps"}, origin, where);
      DrainRatePoint pt{producer_count(e, origin, where + ".producers"),
                        units::gbps_to_bytes_per_s(
                            number(e, "drain_rate_gbps", origin, where + ".drain_rate_gbps", ranges::kRateGbps))};
      if (!seen.insert(pt.producers).second)
        fail(origin, where, "duplicate point for producers " + std::to_string(pt.producers));
      p.drain_rate_by_producers.push_back(pt);
    }
  }
  // Optional times in µs, >= 0 and at most 1 ms (a larger value is a unit mistake).
  constexpr Range kOverheadUs{0.0, 1000.0, false, false, "us"};
  auto optional_us = [&](const char* key) {
    if (!j.contains(key)) return 0.0;
    return units::us_to_s(number(j, key, origin, key, kOverheadUs));
  };
  p.knee_ramp_s = optional_us("knee_ramp_us");
  p.burst_overhead_s = optional_us("burst_overhead_us");
  p.zero_gap_overhead_s = optional_us("zero_gap_overhead_us");

  if (j.contains("local_drain_rate_gbps"))
    p.local_drain_rate_bytes_per_s =
        units::gbps_to_bytes_per_s(number(j, "local_drain_rate_gbps", origin, "local_drain_rate_gbps", ranges::kRateGbps));
  if (auto it = j.find("gemm_rate_per_sm"); it != j.end()) {
    if (!it->is_array()) fail(origin, "gemm_rate_per_sm", "must be an array, got " + show(*it));
    constexpr Range kTflopsPerSm{0.0, 1000.0, true, false, "TFLOP/s"};
    for (std::size_t i = 0; i < it->size(); ++i) {
      const std::string where = "gemm_rate_per_sm[" + std::to_string(i) + "]";
      const json& e = (*it)[i];
      if (!e.is_object()) fail(origin, where, "must be an object, got " + show(e));
      reject_unknown_keys(e, {"precision", "tflops_per_sm", "source", "provenance"}, origin, where);
      const json& prec = require(e, "precision", origin, where + ".precision");
      if (!prec.is_string() || (prec.get<std::string>() != "bf16" && prec.get<std::string>() != "fp8"))
        fail(origin, where + ".precision", "must be \"bf16\" or \"fp8\", got " + show(prec));
      GemmRatePoint g{prec.get<std::string>(), 1e12 * number(e, "tflops_per_sm", origin, where + ".tflops_per_sm", kTflopsPerSm)};
      const json& src = require(e, "source", origin, where + ".source");
      if (!src.is_string() || (src.get<std::string>() != "measured" && src.get<std::string>() != "derived" &&
                               src.get<std::string>() != "datasheet"))
        fail(origin, where + ".source", "must be \"measured\", \"derived\" or \"datasheet\", got " + show(src));
      g.source = src.get<std::string>();
      if (auto pv = e.find("provenance"); pv != e.end()) {
        if (!pv->is_object()) fail(origin, where + ".provenance", "must be an object, got " + show(*pv));
        g.provenance = *pv;
      }
      for (const auto& x : p.gemm_rate_per_sm)
        if (x.precision == g.precision) fail(origin, where, "duplicate precision \"" + g.precision + "\"");
      p.gemm_rate_per_sm.push_back(std::move(g));
    }
  }

  if (auto it = j.find("physical_bounds"); it != j.end()) {
    if (!it->is_object()) fail(origin, "physical_bounds", "must be an object, got " + show(*it));
    reject_unknown_keys(*it, {"link_rate_gbps", "link_source", "copy_engine_gbps", "sms"}, origin, "physical_bounds");
    p.bounds.link_rate_bytes_per_s =
        units::gbps_to_bytes_per_s(number(*it, "link_rate_gbps", origin, "physical_bounds.link_rate_gbps", ranges::kRateGbps));
    const json& src = require(*it, "link_source", origin, "physical_bounds.link_source");
    if (!src.is_string() || src.get_ref<const std::string&>().empty() || src.get_ref<const std::string&>().size() > 1024)
      fail(origin, "physical_bounds.link_source", "must be a string of 1..1024 bytes, got " + show(src));
    p.bounds.link_source = src.get<std::string>();
    if (it->contains("copy_engine_gbps"))
      p.bounds.copy_engine_bytes_per_s = units::gbps_to_bytes_per_s(
          number(*it, "copy_engine_gbps", origin, "physical_bounds.copy_engine_gbps", ranges::kRateGbps));
    if (it->contains("sms")) {
      constexpr Range kSms{1.0, 100000.0, false, false, "SMs"};
      const double sms = number(*it, "sms", origin, "physical_bounds.sms", kSms);
      if (sms != std::floor(sms)) fail(origin, "physical_bounds.sms", "must be an integer, got " + show((*it)["sms"]));
      p.bounds.sms = static_cast<int>(sms);
    }
    // No drain rate of the file may exceed the link's.
    const double link = p.bounds.link_rate_bytes_per_s;
    auto check = [&](double rate, const std::string& field) {
      if (rate > link * (1.0 + 1e-12))
        fail(origin, field, "is " + std::to_string(units::bytes_per_s_to_gbps(rate)) + " GB/s, above physical_bounds.link_rate_gbps " +
                                std::to_string(units::bytes_per_s_to_gbps(link)) + ": no drain can exceed the link");
    };
    check(p.drain_rate_bytes_per_s, "drain_rate_gbps");
    for (std::size_t i = 0; i < p.drain_rate_by_producers.size(); ++i)
      check(p.drain_rate_by_producers[i].bytes_per_s, "drain_rate_by_producers[" + std::to_string(i) + "].drain_rate_gbps");
    for (std::size_t i = 0; i < p.capacity.size(); ++i)
      check(p.capacity[i].isolated_drain_rate_bytes_per_s, "capacity[" + std::to_string(i) + "].drain_rate_gbps");
  }

  if (auto it = j.find("provenance"); it != j.end()) {
    if (!it->is_object()) fail(origin, "provenance", "must be an object, got " + show(*it));
    p.provenance = *it;
  }
  return p;
}

Platform load_platform_file(const std::string& path) { return platform_from_json(load_json_input(path, "platform"), path); }

json platform_to_json(const Platform& p) {
  json j;
  j["schema"] = kPlatformSchema;
  j["name"] = p.name;
  if (!p.description.empty()) j["description"] = p.description;
  j["drain_rate_gbps"] = units::bytes_per_s_to_gbps(p.drain_rate_bytes_per_s);
  j["issue_floor"] = json::array();
  for (const auto& f : p.issue_floor)
    j["issue_floor"].push_back(
        {{"producers", f.producers}, {"bytes_per_producer", f.bytes_per_producer}, {"t_iss0_us", units::s_to_us(f.t_iss0_s)}});
  j["capacity"] = json::array();
  for (const auto& c : p.capacity) {
    json e = {{"producers", c.producers}, {"bytes", c.bytes}};
    if (c.isolated_drain_rate_bytes_per_s > 0.0)
      e["drain_rate_gbps"] = units::bytes_per_s_to_gbps(c.isolated_drain_rate_bytes_per_s);
    j["capacity"].push_back(e);
  }
  if (!p.drain_rate_by_producers.empty()) {
    j["drain_rate_by_producers"] = json::array();
    for (const auto& d : p.drain_rate_by_producers)
      j["drain_rate_by_producers"].push_back(
          {{"producers", d.producers}, {"drain_rate_gbps", units::bytes_per_s_to_gbps(d.bytes_per_s)}});
  }
  if (p.knee_ramp_s > 0.0) j["knee_ramp_us"] = units::s_to_us(p.knee_ramp_s);
  if (p.burst_overhead_s > 0.0) j["burst_overhead_us"] = units::s_to_us(p.burst_overhead_s);
  if (p.zero_gap_overhead_s > 0.0) j["zero_gap_overhead_us"] = units::s_to_us(p.zero_gap_overhead_s);
  if (p.local_drain_rate_bytes_per_s > 0.0) j["local_drain_rate_gbps"] = units::bytes_per_s_to_gbps(p.local_drain_rate_bytes_per_s);
  if (p.bounds.link_rate_bytes_per_s > 0.0) {
    json b = {{"link_rate_gbps", units::bytes_per_s_to_gbps(p.bounds.link_rate_bytes_per_s)}, {"link_source", p.bounds.link_source}};
    if (p.bounds.copy_engine_bytes_per_s > 0.0) b["copy_engine_gbps"] = units::bytes_per_s_to_gbps(p.bounds.copy_engine_bytes_per_s);
    if (p.bounds.sms > 0) b["sms"] = p.bounds.sms;
    j["physical_bounds"] = b;
  }
  if (!p.gemm_rate_per_sm.empty()) {
    j["gemm_rate_per_sm"] = json::array();
    for (const auto& g : p.gemm_rate_per_sm)
      j["gemm_rate_per_sm"].push_back({{"precision", g.precision}, {"tflops_per_sm", g.flop_per_s_per_sm / 1e12},
                                       {"source", g.source}, {"provenance", g.provenance}});
  }
  j["provenance"] = p.provenance;
  return j;
}

Platform default_platform() {
  return platform_from_json(json::parse(embedded_default_platform_json()),
                            "embedded default (" + std::string(embedded_default_platform_origin()) + ")");
}

Platform load_platform_or_default(const std::string& path) {
  return path.empty() ? default_platform() : load_platform_file(path);
}

}  // namespace xstage::model
