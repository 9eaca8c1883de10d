// xstage fidelity: every calibration record predicted by the closed form and the simulator against
// its measurement (src/sim/fidelity.cpp), as a table or JSON. The report and its checks are the planner's
// (xstage/planner/fit.hpp); the CLI stamps its provenance, writes --out and prints.

#include "cli_common.hpp"
#include "registry.hpp"
#include "xstage/planner/fit.hpp"
#include "xstage/sim/cross_validation.hpp"
#include "xstage/sim/fidelity.hpp"

namespace xstage::cli {
namespace {

// `fidelity`'s options: the planner's request (xstage/planner/fit.hpp) and what only the CLI does, writing a copy of
// the report (--out, --force) and printing (--json).
struct FidelityOptions {
  planner::FidelityRequest request;
  std::string out;
  bool force = false;
  bool json = false;
};

std::string pct(double x) { return fmt_num(100.0 * x, 1) + " %"; }

void run_fidelity(const FidelityOptions& o) {
  const planner::FidelityRequest& r = o.request;
  const std::vector<std::string> inputs = r.inputs();
  if (!o.out.empty()) check_output_path("--out", o.out, o.force, inputs);
  planner::FidelityResult result = planner::fidelity(r);
  const model::Platform& platform = result.platform;
  const sim::FidelityReport& rep = result.report;
  const std::vector<sim::TileStallRow>& stalls = result.stalls;
  const std::vector<sim::GemmRateFit>& gemm = result.gemm;
  const std::vector<sim::UlyssesRow>& uly = result.ulysses;
  nlohmann::json& j = result.json;
  stamp_provenance(j, inputs);
  if (!o.out.empty()) write_file_atomically(o.out, j.dump(2) + "\n", o.force, inputs);
  if (o.json) {
    print_json(j);
    return;
  }
  auto row = [](const char* what, const sim::ErrorSummary& s) {
    return std::vector<std::string>{what, std::to_string(s.points), pct(s.median_rel), pct(s.max_rel)};
  };
  out_stream() << "fidelity of " << platform_label(r.platform, platform) << " on " << r.records << "\n";
  print_table({"prediction", "points", "median |err|", "max |err|"},
              {row("periodic T_iss, closed form", rep.periodic_model_t_iss),
               row("periodic T_period, closed form", rep.periodic_model_t_period),
               row("periodic T_iss, simulator", rep.periodic_sim_t_iss),
               row("periodic T_period, simulator", rep.periodic_sim_t_period),
               row("gap sweep T_iss, closed form", rep.sweep_model_t_iss),
               row("gap sweep T_period, closed form", rep.sweep_model_t_period),
               row("gap sweep T_iss, simulator", rep.sweep_sim_t_iss),
               row("gap sweep T_period, simulator", rep.sweep_sim_t_period),
               row("isolated T_iss, smooth knee", rep.isolated_model_t_iss),
               row("isolated T_iss, simulator", rep.isolated_sim_t_iss),
               row("isolated past the knee, smooth knee", rep.isolated_past_knee_model_t_iss),
               row("isolated past the knee, simulator", rep.isolated_past_knee_sim_t_iss)});
  if (rep.local_flat_t_iss_s > 0.0) {
    out_stream() << "local control at G = 0: T_iss " << fmt_num(100.0 * (rep.local_zero_gap_ratio - 1.0), 1)
                 << " % above its plateau " << fmt_us(rep.local_flat_t_iss_s, 3) << " us";
    if (rep.local_drain_rate_bytes_per_s > 0.0)
      out_stream() << "; local memory's own drain " << fmt_num(rep.local_drain_rate_bytes_per_s / 1e9, 0)
                   << " GB/s predicts " << fmt_us(rep.local_zero_gap_model_t_iss_s, 3) << " us ("
                   << pct(rep.local_zero_gap_model_rel_error) << ")";
    out_stream() << "\n";
  }
  if (!stalls.empty()) {
    std::vector<std::vector<std::string>> rows;
    for (const auto& r : stalls)
      rows.push_back({r.shape, r.precision, r.schedule, fmt_us(r.store_span_s, 2), fmt_us(r.cover_s, 2),
                      fmt_us(r.predicted_stall_s, 2), fmt_us(r.measured_stall_s, 2) + (r.wait_local_s < 0 ? " (<=)" : ""),
                      r.layer_local_s < 0 ? "" : fmt_num(100.0 * r.residual_s / r.layer_remote_s, 2) + " %"});
    out_stream() << "per-tile stall (eq. 15) of the traced MoE kernels\n";
    print_table({"shape", "precision", "order", "T_RS us", "cover us", "predicted us", "measured us", "residual"}, rows);
    rows.clear();
    for (const auto& g : gemm) {
      const model::GemmRate on = platform.gemm_rate_at(g.precision);
      rows.push_back({g.precision, std::to_string(g.schedules), fmt_num(g.flop_per_s_per_sm / 1e12, 2),
                      fmt_num(g.min_flop_per_s_per_sm / 1e12, 2) + " - " + fmt_num(g.max_flop_per_s_per_sm / 1e12, 2),
                      fmt_num(on.flop_per_s_per_sm / 1e12, 2) + " (" + on.source + ")"});
    }
    out_stream() << "sustained per-SM GEMM rate of the traced kernels (tile FLOP / Linear-2 mainloop + staging)\n";
    print_table({"precision", "schedules", "median TFLOP/s/SM", "range", "platform"}, rows);
  }
  if (!uly.empty()) {
    std::vector<std::vector<std::string>> rows;
    for (const auto& r : uly)
      rows.push_back({std::to_string(r.seq_len) + " x " + std::to_string(r.heads_per_gpu), r.tile_order,
                      fmt_us(r.qloop_gap_s, 1), r.binding_bound, fmt_us(r.first_burst_stall_s, 2), fmt_us(r.tail_drain_s, 2),
                      fmt_us(r.predicted_residual_s, 1) + " (" + fmt_num(100.0 * r.predicted_residual_s / r.fa_s, 2) + " %)",
                      fmt_us(r.measured_residual_s, 1) + " (" + fmt_num(100.0 * r.measured_residual_s / r.fa_s, 2) + " %)"});
    out_stream() << "fused Ulysses attention (TMA epilogue): predicted vs measured residual over fa-only-tma\n";
    print_table({"M x heads", "order", "G_Qloop us", "binds", "first burst us", "tail us", "predicted", "measured"}, rows);
  }
  if (result.cross_validation) {
    const sim::CrossValidation& cv = *result.cross_validation;
    out_stream() << "cross-validation: the platform refitted on part of the records, the rest predicted ("
                 << (cv.max_rate_bytes_per_s > 0 ? "every rate bounded by the link's " + fmt_num(cv.max_rate_bytes_per_s / 1e9, 1) + " GB/s"
                                                 : std::string("no physical bound: the platform states no physical_bounds"))
                 << "); median / max |err|, closed form (simulator)\n";
    auto cell = [](const sim::ErrorSummary& m, const sim::ErrorSummary& s) {
      return pct(m.median_rel) + " / " + pct(m.max_rel) + " (" + pct(s.median_rel) + " / " + pct(s.max_rel) + ")";
    };
    std::vector<std::vector<std::string>> rows;
    auto add = [&](const std::string& name, const sim::CvErrors& e, int points, const std::string& note) {
      rows.push_back({name, std::to_string(points), cell(e.periodic_model_t_iss, e.periodic_sim_t_iss),
                      cell(e.periodic_model_t_period, e.periodic_sim_t_period), cell(e.isolated_model_t_iss, e.isolated_sim_t_iss), note});
    };
    add("in-sample (all records)", cv.in_sample, cv.in_sample.periodic_model_t_iss.points + cv.in_sample.isolated_model_t_iss.points, "");
    for (const auto& s : cv.schemes) {
      std::string note = std::to_string(s.folds) + " folds, max rate " + fmt_num(s.max_fitted_rate_bytes_per_s / 1e9, 1) + " GB/s";
      for (const auto& f : s.failed) note += "; " + f.fold + " not fitted (" + std::to_string(f.records) + " records)";
      add("held out: " + s.name, s.held_out, static_cast<int>(s.points.size()), note);
    }
    print_table({"scheme", "points", "periodic T_iss", "periodic T_period", "isolated T_iss", "folds"}, rows);
    for (const auto& s : cv.schemes)
      for (const auto& f : s.failed) out_stream() << "  " << s.name << ", " << f.fold << ": " << f.reason << "\n";
  }
  if (!o.out.empty()) out_stream() << "wrote " << o.out << "\n";
}

void add_fidelity(CLI::App& root) {
  auto o = std::make_shared<FidelityOptions>();
  CLI::App* cmd = root.add_subcommand("fidelity", "Predicted vs measured for every calibration record (closed form and simulator)");
  add_platform_option(cmd, o->request.platform);
  cmd->add_option("--records", o->request.records, "calibration records CSV (xstage calibrate's records.csv)")
      ->required()->check(CLI::ExistingFile);
  cmd->add_option("--raw", o->request.raw, "raw.json of the same calibration: the measured loop gap of its zero-gap points")
      ->check(CLI::ExistingFile);
  cmd->add_option("--traces", o->request.traces, "traced MoE bench files (xstage.moe_bench[_set] with trace entries): eq. 15 per tile")
      ->check(CLI::ExistingFile);
  cmd->add_option("--ulysses", o->request.ulysses, "Ulysses sweep file (xstage.ulysses_sweep/1): predicted vs measured residual")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--cross-validate", o->request.cross_validate,
                "Also refit the platform on part of the records and predict the rest (k-fold, leave one K, B or gap sweep "
                "out), as `xstage fit` fits, under the platform's physical_bounds: held-out errors beside in-sample ones");
  cmd->add_option("--folds", o->request.folds, "folds of the k-fold scheme (2..10; default 2)")
      ->check(in_range(2, 10))
      ->default_str("2");  // unset: the planner's default (FidelityRequest::folds), 2
  add_out_option(cmd, o->out, "Also write the JSON report to this file");
  add_force_option(cmd, o->force);
  add_json_option(cmd, o->json);
  cmd->callback([o] {
    planner::check_fidelity(o->request, true);
    run_fidelity(*o);
  });
}

}  // namespace
}  // namespace xstage::cli

XSTAGE_SUBCOMMAND(cmd_fidelity, "fidelity", 37, add_fidelity);
