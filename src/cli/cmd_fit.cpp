// xstage fit: calibration records (CSV) → platform file. The fit, its checks and its JSON are the planner's
// (xstage/planner/fit.hpp); the CLI writes the platform file and prints.
#include <filesystem>
#include <iostream>

#include "cli_common.hpp"
#include "registry.hpp"
#include "xstage/model/calibration_fit.hpp"
#include "xstage/planner/fit.hpp"

namespace xstage::cli {
namespace {

// `fit`'s options: the planner's request (xstage/planner/fit.hpp) and what only the CLI does, writing the platform
// file (--out, --force) and printing (--json).
struct FitCliOptions {
  planner::FitRequest request;
  std::string out;
  bool force = false;
  bool json = false;
};

void run_fit(const FitCliOptions& o) {
  const planner::FitRequest& r = o.request;
  planner::check_fit(r, true);
  std::vector<std::string> inputs = {r.records};
  if (!r.raw.empty()) inputs.push_back(r.raw);
  check_output_path("--out", o.out, o.force, inputs);
  planner::FitResult result = planner::fit(r, true, o.out, false);
  const model::FitResult& fit = result.fit;
  write_file_atomically(o.out, result.platform.dump(2) + "\n", o.force, inputs);

  nlohmann::json& j = result.json;
  j["out"] = o.out;
  for (const auto& w : fit.warnings) err_stream() << "xstage: warning: fit: " << w << '\n';
  if (o.json) {
    print_json(j);
    return;
  }
  out_stream() << "wrote " << o.out << " from " << result.records.size() << " records\n";
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
                 << fmt_num(r.link_gbps, 1) << " GB/s; written at " << fmt_num(b.written_bytes_per_s / 1e9, 1)
                 << " GB/s (largest error of the records it governs " << fmt_num(100 * b.max_rel_error_unbounded, 1) << " % -> "
                 << fmt_num(100 * b.max_rel_error_bounded, 1) << " %): the model's structure does not explain them\n";
}

void add_fit(CLI::App& root) {
  auto o = std::make_shared<FitCliOptions>();
  CLI::App* cmd = root.add_subcommand("fit", "Fit a platform (R, T_iss0, Q) from calibration records");
  cmd->add_option("--records", o->request.records, "Records CSV (" + std::string(model::kRecordsHeader) + ")")
      ->required()->check(CLI::ExistingFile);
  cmd->add_option("--raw", o->request.raw, "raw.json of the same calibration: the zero-gap records' measured loop gaps")
      ->check(CLI::ExistingFile);
  add_out_option(cmd, o->out, "Platform JSON to write")->required();
  cmd->add_option("--name", o->request.name, "Platform name written into the file")->capture_default_str();
  cmd->add_option("--link-gbps", o->request.link_gbps,
                  "Physical bound: the link's rate per direction, GB/s; no fitted rate exceeds it, a rate the records want "
                  "above it is written at the bound and reported as a misfit; written to physical_bounds")
      ->check(CLI::Range(0.001, 1e6));
  cmd->add_option("--link-source", o->request.link_source, "Where --link-gbps comes from (required with it)");
  cmd->add_option("--copy-engine-gbps", o->request.copy_engine_gbps, "Measured copy-engine peer rate, GB/s (physical_bounds)")
      ->check(CLI::Range(0.001, 1e6));
  cmd->add_option("--sms", o->request.sms, "SM count (physical_bounds)")->check(CLI::Range(1, 1000000));
  add_force_option(cmd, o->force);
  add_json_option(cmd, o->json, "Fit summary as JSON on stdout");
  cmd->callback([o] { run_fit(*o); });
}

}  // namespace
}  // namespace xstage::cli

XSTAGE_SUBCOMMAND(cmd_fit, "fit", 20, add_fit);
