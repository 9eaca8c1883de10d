#include "xstage/planner/fit.hpp"

#include <filesystem>
#include <system_error>
#include <utility>

#include "request_args.hpp"
#include "xstage/model/bounded_text.hpp"
#include "xstage/model/error.hpp"
#include "xstage/model/units.hpp"
#include "xstage/planner/requests.hpp"
#include "xstage/planner/text.hpp"
#include "xstage/sim/simulator.hpp"

namespace xstage::planner {

namespace {

// The CLI's CLI::Range(0.001, 1e6) of a rate in GB/s (--link-gbps, --copy-engine-gbps), as CLI11 prints it.
const detail::NumberRule kGbpsRule{false, false, std::pair{0.001, 1e6}, false, true};

}  // namespace

// ---- fit -----------------------------------------------------------------------------------------------------------

FitRequest fit_request(const nlohmann::json& request) {
  detail::Args a(request, "fit");
  FitRequest r;
  // In the order of the CLI's options, whose checks run in that order; a missing records file is reported after
  // every value's rule, as the CLI reports a missing required option.
  r.records = a.existing_file("records");
  r.raw = a.existing_file("raw");
  r.name = a.text("name").value_or(r.name);
  r.link_gbps = a.number("link_gbps", kGbpsRule).value_or(0.0);
  r.link_source = a.text("link_source").value_or("");
  r.copy_engine_gbps = a.number("copy_engine_gbps", kGbpsRule).value_or(0.0);
  r.sms = a.integer("sms", {false, false, std::pair{1.0, 1e6}, true, true}).value_or(0);
  a.done();
  if (r.records.empty()) throw RequestError("records is required");
  return r;
}

void check_fit(const FitRequest& r, bool flag_names) {
  const std::string name = detail::arg(flag_names, "name");
  if (r.name.empty() || r.name.find_first_not_of(" \t") == std::string::npos)
    throw InputError(name + ": must not be empty, got \"" + bounded_text(r.name) + "\"");
  // The name is printed by every command that loads the platform: printable UTF-8 only (no control
  // characters, escapes, newlines or bidirectional overrides), at most 120 bytes.
  // one_line escapes every such character (xstage/model/bounded_text.hpp): a name it leaves unchanged is printable.
  const bool printable = r.name.size() <= 120 && one_line(r.name, 1000) == r.name;
  if (!printable)
    throw InputError(name + ": must be printable UTF-8 text of at most 120 bytes, got \"" + shown_text(r.name) + "\"");
}

FitResult fit(const FitRequest& r, bool flag_names, const std::string& platform_origin, bool with_platform) {
  const auto name = [flag_names](const char* key) { return detail::arg(flag_names, key); };
  FitResult out;
  out.records = model::load_records_csv(r.records);
  model::FitOptions fo;
  if (!r.raw.empty()) fo.zero_gap_loops = model::load_zero_gap_loops(r.raw);
  fo.isolated_simulator = sim::isolated_issue_time_s;  // the knee is fitted for the simulator too
  if (r.link_gbps > 0.0 && r.link_source.empty())
    throw InputError(name("link_source") + ": required with " + name("link_gbps") +
                     " (where the link's rate per direction comes from)");
  if (r.link_gbps <= 0.0 && (!r.link_source.empty() || r.copy_engine_gbps > 0.0 || r.sms > 0))
    throw InputError(name("link_source") + ", " + name("copy_engine_gbps") + ", " + name("sms") + ": only with " +
                     name("link_gbps"));
  fo.max_rate_bytes_per_s = units::gbps_to_bytes_per_s(r.link_gbps);
  model::FitResult& fit = out.fit;
  try {
    fit = model::fit_platform(out.records, fo);
  } catch (const InputError& e) {
    throw InputError(bounded_text(r.records, 240) + ": cannot fit a platform from these records: " + e.what() +
                     " (needed: zero-gap periodic points and, at each producer count, a gap sweep with gap > 0 or "
                     "isolated points)");
  }
  if (fit.platform.issue_floor.empty())
    throw InputError(bounded_text(r.records, 240) +
                     ": no periodic gap sweep with gap > 0 and no isolated points: cannot fit T_iss0");
  fit.platform.name = r.name;
  if (r.link_gbps > 0.0) {
    fit.platform.bounds.link_rate_bytes_per_s = units::gbps_to_bytes_per_s(r.link_gbps);
    fit.platform.bounds.link_source = r.link_source;
    fit.platform.bounds.copy_engine_bytes_per_s = units::gbps_to_bytes_per_s(r.copy_engine_gbps);
    fit.platform.bounds.sms = r.sms;
  }
  fit.platform.provenance["records_file"] = r.records;
  if (!r.raw.empty()) fit.platform.provenance["raw_file"] = r.raw;
  out.platform = model::platform_to_json(fit.platform);
  // The platform must load with the tool's own loader; a fit it would reject is refused, not returned.
  model::platform_from_json(out.platform, platform_origin);

  nlohmann::json& j = out.json;
  stamp_output(j, "xstage.fit/1");
  j["out"] = nullptr;
  j["drain_rate_gbps"] = units::bytes_per_s_to_gbps(fit.rate.drain_rate_bytes_per_s);
  j["rate_points_used"] = fit.rate.points_used;
  j["rate_points_rejected"] = fit.rate.points_rejected;
  j["rate_median_rel_residual"] = fit.rate.median_rel_residual;
  j["rate_max_rel_residual"] = fit.rate.max_rel_residual;
  j["issue_floor"] = nlohmann::json::array();
  for (const auto& f : fit.floors)
    j["issue_floor"].push_back({{"producers", f.producers},
                                {"bytes_per_producer", f.bytes_per_producer},
                                {"t_iss0_us", units::s_to_us(f.t_iss0_s)},
                                {"points", f.points_used},
                                {"mad_us", units::s_to_us(f.mad_s)}});
  j["drain_rate_by_producers"] = nlohmann::json::array();
  for (const auto& rp : fit.rate_by_producers)
    j["drain_rate_by_producers"].push_back({{"producers", rp.producers},
                                            {"drain_rate_gbps", units::bytes_per_s_to_gbps(rp.bytes_per_s)},
                                            {"robust_slope_gbps", units::bytes_per_s_to_gbps(rp.fit.drain_rate_bytes_per_s)},
                                            {"periodic_points", rp.periodic_points},
                                            {"max_rel_error", rp.max_rel_error}});
  j["knees"] = nlohmann::json::array();
  for (const auto& k : fit.knees)
    j["knees"].push_back({{"producers", k.producers},
                          {"knee_found", k.knee_found},
                          {"knee_volume_bytes", k.knee_volume_bytes},
                          {"capacity_bytes", k.capacity_bytes},
                          {"capacity_is_lower_bound", !k.knee_found},
                          {"median_rel_residual", k.median_rel_residual},
                          {"ramped_capacity_bytes", k.ramped_capacity_bytes},
                          {"ramped_drain_rate_gbps", units::bytes_per_s_to_gbps(k.ramped_drain_rate_bytes_per_s)},
                          {"ramped_max_rel_residual", k.ramped_max_rel_residual},
                          {"simulated_max_rel_residual", k.simulated_max_rel_residual}});
  j["bounded"] = nlohmann::json::array();
  for (const auto& b : fit.bounded)
    j["bounded"].push_back({{"parameter", b.parameter},
                            {"wanted_gbps", units::bytes_per_s_to_gbps(b.unbounded_bytes_per_s)},
                            {"written_gbps", units::bytes_per_s_to_gbps(b.written_bytes_per_s)},
                            {"max_rel_error_wanted", b.max_rel_error_unbounded},
                            {"max_rel_error_written", b.max_rel_error_bounded}});
  j["link_rate_gbps"] = r.link_gbps > 0.0 ? nlohmann::json(r.link_gbps) : nlohmann::json(nullptr);
  j["warnings"] = fit.warnings;
  if (with_platform) j["platform"] = out.platform;
  return out;
}

// ---- fidelity ------------------------------------------------------------------------------------------------------

std::vector<std::string> FidelityRequest::inputs() const {
  std::vector<std::string> files = {records};
  if (!platform.empty()) files.push_back(platform);
  if (!raw.empty()) files.push_back(raw);
  if (!ulysses.empty()) files.push_back(ulysses);
  files.insert(files.end(), traces.begin(), traces.end());
  return files;
}

FidelityRequest fidelity_request(const nlohmann::json& request) {
  detail::Args a(request, "fidelity");
  FidelityRequest r;
  // In the order of the CLI's options; a missing records file is reported after every value's rule, as the CLI
  // reports a missing required option.
  r.platform = a.existing_file("platform");
  r.records = a.existing_file("records");
  r.raw = a.existing_file("raw");
  r.traces = a.existing_files("traces");
  r.ulysses = a.existing_file("ulysses");
  r.cross_validate = a.flag("cross_validate");
  r.folds = a.integer("folds", {false, false, std::pair{2.0, 10.0}});
  a.done();
  if (r.records.empty()) throw RequestError("records is required");
  return r;
}

void check_fidelity(const FidelityRequest& r, bool flag_names) {
  if (r.folds && !r.cross_validate)
    throw InputError(detail::arg(flag_names, "folds") + ": only with " + detail::arg(flag_names, "cross_validate"));
}

FidelityResult fidelity(const FidelityRequest& r) {
  FidelityResult out;
  out.platform = model::load_platform_or_default(r.platform);
  const auto records = model::load_records_csv(r.records);
  sim::FidelityOptions fo;
  if (!r.raw.empty()) fo.zero_gap_loops = sim::load_zero_gap_loops(r.raw);
  fo.records_origin = r.records;
  out.report = sim::fidelity_report(out.platform, records, fo);
  nlohmann::json& j = out.json;
  j = sim::to_json(out.report);
  stamp_output(j, "xstage.fidelity/1", r.platform, out.platform);
  // The files read, with their sizes (the CLI's provenance adds the command line and the build's revision).
  nlohmann::json files = nlohmann::json::array();
  for (const auto& path : r.inputs()) {
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(path, ec);
    files.push_back({{"path", path}, {"bytes", ec ? nlohmann::json(nullptr) : nlohmann::json(bytes)}});
  }
  j["provenance"] = {{"xstage_version", version()}, {"inputs", std::move(files)}};
  j["records_file"] = r.records;
  if (!r.raw.empty()) j["raw_file"] = r.raw;
  for (const auto& f : r.traces) {
    const auto rows = sim::tile_stall_rows(f);
    out.stalls.insert(out.stalls.end(), rows.begin(), rows.end());
  }
  out.gemm = sim::fit_gemm_rates(out.stalls);
  if (!r.traces.empty()) {
    j["tile_stalls"] = sim::to_json(out.stalls);
    j["gemm_rate_per_sm"] = sim::to_json(out.gemm);
  }
  if (!r.ulysses.empty()) {
    out.ulysses = sim::ulysses_rows(out.platform, r.ulysses);
    j["ulysses"] = sim::to_json(out.ulysses);
  }
  if (r.cross_validate) {
    sim::CvOptions co;
    co.k = r.folds.value_or(2);
    co.fit.zero_gap_loops = fo.zero_gap_loops;
    co.fit.isolated_simulator = sim::isolated_issue_time_s;  // as `xstage fit` fits
    co.fit.max_rate_bytes_per_s = out.platform.bounds.link_rate_bytes_per_s;
    co.fidelity = fo;
    out.cross_validation = sim::cross_validate(records, co);
    j["cross_validation"] = sim::to_json(*out.cross_validation);
  }
  return out;
}

}  // namespace xstage::planner
