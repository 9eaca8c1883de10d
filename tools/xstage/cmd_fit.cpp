// xstage fit: calibration records (CSV) → platform file.
#include <filesystem>
#include <iostream>

#include "cli_common.hpp"
#include "registry.hpp"
#include "xstage/model/bounded_text.hpp"
#include "xstage/model/calibration_fit.hpp"
#include "xstage/model/error.hpp"
#include "xstage/model/units.hpp"
#include "xstage/sim/simulator.hpp"

namespace xstage::cli {
namespace {

struct FitCliOptions {
  std::string records;
  std::string raw;  // optional raw.json: the zero-gap records' measured loop gaps
  std::string out;
  std::string name = "fitted";
  bool force = false;
  bool json = false;
  // physical_bounds written into the platform; the fit runs under the link's rate (0: unbounded).
  double link_gbps = 0.0;
  std::string link_source;
  double copy_engine_gbps = 0.0;
  int sms = 0;
};

void run_fit(const FitCliOptions& o) {
  if (o.name.empty() || o.name.find_first_not_of(" \t") == std::string::npos)
    throw InputError("--name: must not be empty, got \"" + bounded_text(o.name) + "\"");
  // The name is printed by every command that loads the platform: printable UTF-8 only (no control
  // characters, escapes, newlines or bidirectional overrides), at most 120 bytes.
  // one_line escapes every such character (xstage/model/bounded_text.hpp): a name it leaves unchanged is printable.
  const bool printable = o.name.size() <= 120 && one_line(o.name, 1000) == o.name;
  if (!printable)
    throw InputError("--name: must be printable UTF-8 text of at most 120 bytes, got \"" + shown_text(o.name) + "\"");
  std::vector<std::string> inputs = {o.records};
  if (!o.raw.empty()) inputs.push_back(o.raw);
  check_output_path("--out", o.out, o.force, inputs);
  const auto records = model::load_records_csv(o.records);
  model::FitOptions fo;
  if (!o.raw.empty()) fo.zero_gap_loops = model::load_zero_gap_loops(o.raw);
  fo.isolated_simulator = sim::isolated_issue_time_s;  // the knee is fitted for the simulator too
  if (o.link_gbps > 0.0 && o.link_source.empty())
    throw InputError("--link-source: required with --link-gbps (where the link's rate per direction comes from)");
  if (o.link_gbps <= 0.0 && (!o.link_source.empty() || o.copy_engine_gbps > 0.0 || o.sms > 0))
    throw InputError("--link-source, --copy-engine-gbps, --sms: only with --link-gbps");
  fo.max_rate_bytes_per_s = units::gbps_to_bytes_per_s(o.link_gbps);
  model::FitResult fit;
  try {
    fit = model::fit_platform(records, fo);
  } catch (const InputError& e) {
    throw InputError(bounded_text(o.records, 240) + ": cannot fit a platform from these records: " + e.what() +
                     " (needed: zero-gap periodic points and, at each producer count, a gap sweep with gap > 0 or "
                     "isolated points)");
  }
  if (fit.platform.issue_floor.empty())
    throw InputError(bounded_text(o.records, 240) +
                     ": no periodic gap sweep with gap > 0 and no isolated points: cannot fit T_iss0");
  fit.platform.name = o.name;
  if (o.link_gbps > 0.0) {
    fit.platform.bounds.link_rate_bytes_per_s = units::gbps_to_bytes_per_s(o.link_gbps);
    fit.platform.bounds.link_source = o.link_source;
    fit.platform.bounds.copy_engine_bytes_per_s = units::gbps_to_bytes_per_s(o.copy_engine_gbps);
    fit.platform.bounds.sms = o.sms;
  }
  fit.platform.provenance["records_file"] = o.records;
  if (!o.raw.empty()) fit.platform.provenance["raw_file"] = o.raw;
  const nlohmann::json platform_json = model::platform_to_json(fit.platform);
  // The file must load with the tool's own loader; a fit it would reject is refused, not written.
  model::platform_from_json(platform_json, o.out);
  write_file_atomically(o.out, platform_json.dump(2) + "\n", o.force, inputs);

  nlohmann::json j;
  stamp_json(j, "xstage.fit/1");
  j["out"] = o.out;
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
  j["link_rate_gbps"] = o.link_gbps > 0.0 ? nlohmann::json(o.link_gbps) : nlohmann::json(nullptr);
  j["warnings"] = fit.warnings;
  for (const auto& w : fit.warnings) err_stream() << "xstage: warning: fit: " << w << '\n';
  if (o.json) {
    print_json(j);
    return;
  }
  out_stream() << "wrote " << o.out << " from " << records.size() << " records\n";
  out_stream() << "R = " << fmt_num(j["drain_rate_gbps"].get<double>(), 1) << " GB/s (" << fit.rate.points_used
            << " points, " << fit.rate.points_rejected << " rejected, median residual "
            << fmt_num(100 * fit.rate.median_rel_residual, 2) << " %)\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& f : fit.floors)
    rows.push_back({std::to_string(f.producers), fmt_num(f.bytes_per_producer, 0), fmt_us(f.t_iss0_s, 3),
                    std::to_string(f.points_used)});
  if (!rows.empty()) print_table({"K", "B (bytes)", "T_iss0 (us)", "points"}, rows);
  rows.clear();
  for (const auto& k : fit.knees)
    rows.push_back({std::to_string(k.producers), k.knee_found ? "yes" : "no (lower bound)",
                    fmt_mib(k.knee_volume_bytes, 3), fmt_mib(k.capacity_bytes, 3),
                    k.ramped_drain_rate_bytes_per_s > 0.0 ? fmt_mib(k.ramped_capacity_bytes, 3) : fmt_mib(k.capacity_bytes, 3),
                    k.ramped_drain_rate_bytes_per_s > 0.0 ? fmt_num(k.ramped_drain_rate_bytes_per_s / 1e9, 1) : "-"});
  if (!rows.empty()) print_table({"K", "knee", "V_knee (MiB)", "Q corner (MiB)", "Q written (MiB)", "R_iso written (GB/s)"}, rows);
  out_stream() << "Q written: the smooth knee's capacity (docs/model.md, refinement 3), the one the platform file holds; "
                  "Q corner: eq. 7's two-segment fit, printed for comparison only\n";
  rows.clear();
  for (const auto& rp : fit.rate_by_producers)
    rows.push_back({std::to_string(rp.producers), fmt_num(rp.bytes_per_s / 1e9, 1), fmt_num(rp.fit.drain_rate_bytes_per_s / 1e9, 1),
                    fmt_num(100 * rp.max_rel_error, 1) + " %"});
  if (!rows.empty()) print_table({"K", "R(K) written (GB/s)", "robust slope (GB/s)", "max |err| at K"}, rows);
  for (const auto& b : fit.bounded)
    out_stream() << "misfit: " << b.parameter << " wants " << fmt_num(b.unbounded_bytes_per_s / 1e9, 1) << " GB/s, above the link's "
                 << fmt_num(o.link_gbps, 1) << " GB/s; written at " << fmt_num(b.written_bytes_per_s / 1e9, 1)
                 << " GB/s (largest error of the records it governs " << fmt_num(100 * b.max_rel_error_unbounded, 1) << " % -> "
                 << fmt_num(100 * b.max_rel_error_bounded, 1) << " %): the model's structure does not explain them\n";
}

void add_fit(CLI::App& root) {
  auto o = std::make_shared<FitCliOptions>();
  CLI::App* cmd = root.add_subcommand("fit", "Fit a platform (R, T_iss0, Q) from calibration records");
  cmd->add_option("--records", o->records, "Records CSV (" + std::string(model::kRecordsHeader) + ")")
      ->required()->check(CLI::ExistingFile);
  cmd->add_option("--raw", o->raw, "raw.json of the same calibration: the zero-gap records' measured loop gaps")
      ->check(CLI::ExistingFile);
  add_out_option(cmd, o->out, "Platform JSON to write")->required();
  cmd->add_option("--name", o->name, "Platform name written into the file")->capture_default_str();
  cmd->add_option("--link-gbps", o->link_gbps,
                  "Physical bound: the link's rate per direction, GB/s; no fitted rate exceeds it, a rate the records want "
                  "above it is written at the bound and reported as a misfit; written to physical_bounds")
      ->check(CLI::Range(0.001, 1e6));
  cmd->add_option("--link-source", o->link_source, "Where --link-gbps comes from (required with it)");
  cmd->add_option("--copy-engine-gbps", o->copy_engine_gbps, "Measured copy-engine peer rate, GB/s (physical_bounds)")
      ->check(CLI::Range(0.001, 1e6));
  cmd->add_option("--sms", o->sms, "SM count (physical_bounds)")->check(CLI::Range(1, 1000000));
  add_force_option(cmd, o->force);
  add_json_option(cmd, o->json, "Fit summary as JSON on stdout");
  cmd->callback([o] { run_fit(*o); });
}

}  // namespace
}  // namespace xstage::cli

XSTAGE_SUBCOMMAND(cmd_fit, "fit", 20, add_fit);
