// `xstage calibrate`: plan, run with a progress bar inside a time budget, fit once, report, plot.
#include "xstage/probe/calibrate.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>

#include "xstage/comm/team.hpp"
#include "xstage/gpu/check.hpp"
#include "xstage/gpu/provenance.hpp"
#include "xstage/model/calibration_fit.hpp"
#include "xstage/model/output_file.hpp"
#include "xstage/probe/calibration_report.hpp"
#include "xstage/probe/sweep_plan.hpp"

#ifndef XSTAGE_SOURCE_DIR_FOR_SCRIPTS
#define XSTAGE_SOURCE_DIR_FOR_SCRIPTS ""
#endif

namespace xstage::probe {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// A one-line progress bar on stderr: redrawn in place on a terminal, one line per 10 % otherwise.
class ProgressBar {
 public:
  explicit ProgressBar(double total_est_s) : total_(std::max(total_est_s, 1e-3)), tty_(isatty(2)) {}
  void update(double done_est_s, int index, int count, const std::string& label, double elapsed_s) {
    const double frac = std::clamp(done_est_s / total_, 0.0, 1.0);
    const int width = 30;
    const int fill = static_cast<int>(frac * width);
    const double eta = frac > 0.02 ? elapsed_s * (1.0 - frac) / frac : total_ - done_est_s;
    char line[256];
    std::snprintf(line, sizeof(line), "[%-*s] %3d%% %d/%d %-44s %5.0fs ETA %4.0fs", width,
                  std::string(fill, '#').c_str(), static_cast<int>(frac * 100), index, count, label.c_str(),
                  elapsed_s, std::max(0.0, eta));
    if (tty_) {
      std::fprintf(stderr, "\r%s", line);
    } else if (static_cast<int>(frac * 10) > last_decile_ || index == count) {
      last_decile_ = static_cast<int>(frac * 10);
      std::fprintf(stderr, "%s\n", line);
    }
    std::fflush(stderr);
  }
  void finish() {
    if (tty_) std::fprintf(stderr, "\n");
  }

 private:
  double total_;
  bool tty_;
  int last_decile_ = -1;
};

std::string point_label(const PlannedPoint& p) {
  char buf[128];
  std::snprintf(buf, sizeof(buf), "%s %s K=%d B=%lluK G=%.2fus", to_string(p.phase), p.remote ? "remote" : "local",
                p.producers, static_cast<unsigned long long>(p.bytes_per_producer / 1024), p.gap_s * 1e6);
  return buf;
}

ProbeConfig to_config(const PlannedPoint& p, int store_bytes, int threads) {
  ProbeConfig c;
  c.mode = p.periodic ? model::BurstMode::kPeriodic : model::BurstMode::kIsolated;
  c.target = p.remote ? model::StoreTarget::kRemote : model::StoreTarget::kLocal;
  c.pattern = Pattern::kPair;
  c.producers = p.producers;
  c.bytes_per_producer = p.bytes_per_producer;
  c.gap_s = p.gap_s;
  c.gap_kind = p.mma_gap ? GapKind::kMma : GapKind::kSpin;
  c.store_bytes = store_bytes;
  c.bursts = p.bursts;
  c.warmup_bursts = p.warmup_bursts;
  c.threads_per_producer = threads;
  return c;
}

std::string find_plot_script(const std::string& given) {
  namespace fs = std::filesystem;
  if (!given.empty()) return given;
  if (const char* env = std::getenv("XSTAGE_PLOT_SCRIPT")) return env;
  for (const std::string& cand : {std::string("bench/calibration/plot_calibration.py"),
                                 std::string(XSTAGE_SOURCE_DIR_FOR_SCRIPTS) + "/bench/calibration/plot_calibration.py"})
    if (!cand.empty() && fs::exists(cand)) return cand;
  return "";
}

// Does the fit of the records so far find a knee for K? (The fit needs zero-gap points for R: those
// run first.)
bool knee_found_for(const std::vector<LabeledRecord>& pts, bool local_only, int producers) {
  try {
    auto rs = fit_records(pts);
    if (local_only) rs = relabel_local_as_fit_input(rs);
    const auto fit = model::fit_platform(rs);
    for (const auto& k : fit.knees)
      if (k.producers == producers) return k.knee_found;
  } catch (const std::exception&) {
  }
  return false;
}

}  // namespace

int run_calibrate(const CalibrateOptions& o) {
  namespace fs = std::filesystem;
  const auto t_start = Clock::now();
  prepare_output_dir(o.out_dir, o.force, calibrate_output_names());
  int n_dev = 0;
  XSTAGE_CUDA_CHECK(cudaGetDeviceCount(&n_dev));
  for (int g : o.gpus)
    if (g >= n_dev)
      throw InputError("--gpus: GPU " + std::to_string(g) + " does not exist (" + std::to_string(n_dev) + " visible)");
  const double budget = o.time_budget_s > 0 ? o.time_budget_s : (o.quick ? 50.0 : 540.0);

  comm::Team team = comm::Team::single_process(o.gpus);
  const bool remote = team.world_size() >= 2;
  if (!remote)
    std::fprintf(stderr,
                 "xstage calibrate: only one GPU (%d) given: no remote measurement is possible. Running the local-target "
                 "control sweep; the fit on it describes local stores, not a remote platform.\n",
                 o.gpus[0]);
  nlohmann::json provenance = gpu::collect_provenance(o.gpus, o.argc, o.argv);
  ProbeRunner runner(team, o.buffer_bytes, o.path, o.threads_per_producer);
  std::unique_ptr<ProbeRunner> other_runner;  // the second store path, made when first needed

  // Copy-engine references (the bandwidth R is compared with).
  ReportInputs rin;
  rin.main_path = to_string(o.path);
  rin.other_path = to_string(o.path == StorePath::kNcclWindow ? StorePath::kPeerPointer : StorePath::kNcclWindow);
  const std::uint64_t ce_bytes = std::min<std::uint64_t>(256ull << 20, o.buffer_bytes);
  auto ce_local = runner.copy_engine_bandwidth(0, 0, ce_bytes, 10);
  rin.copy_engine.push_back(ce_local.to_json());
  double drain_estimate = ce_local.gbps_median * 1e9;
  if (remote) {
    auto fwd = runner.copy_engine_bandwidth(0, 1, ce_bytes, 10);
    auto back = runner.copy_engine_bandwidth(1, 0, ce_bytes, 10);
    rin.copy_engine.push_back(fwd.to_json());
    rin.copy_engine.push_back(back.to_json());
    rin.copy_engine_peer_gbps = fwd.gbps_median;  // the pair's direction (rank 0 → rank 1)
    drain_estimate = fwd.gbps_median * 1e9;
  }

  SweepOptions so;
  so.quick = o.quick;
  so.sm_count = runner.sm_count();
  so.max_producers = runner.max_producers();
  so.max_volume_bytes = runner.max_volume_per_sender();
  so.remote_available = remote;
  so.path_check = remote && o.path_check;
  so.drain_rate_estimate = drain_estimate;
  so.time_budget_s = std::max(1.0, budget - seconds_since(t_start));
  so.store_bytes = o.store_bytes;
  SweepPlan plan = plan_sweep(so);
  for (const auto& n : plan.notes) rin.notes.push_back(n);

  std::vector<PlannedPoint> queue = plan.points;
  std::vector<LabeledRecord> points;
  nlohmann::json raw_points = nlohmann::json::array();
  std::map<int, KneeSearch> knee_search;
  double done_est = 0, total_est = plan.estimated_seconds;
  ProgressBar bar(total_est);
  bool budget_hit = false;
  std::string failure;

  auto save = [&](bool complete) {
    nlohmann::json raw{{"schema", "xstage.calibration_raw/1"},
                       {"complete", complete},
                       {"provenance", provenance},
                       {"sweep", {{"quick", o.quick}, {"estimated_seconds", plan.estimated_seconds},
                                  {"burst_scale", plan.burst_scale}, {"time_budget_s", budget},
                                  {"store_bytes", o.store_bytes}, {"store_path", to_string(o.path)},
                                  {"buffer_bytes", o.buffer_bytes}, {"threads_per_producer", o.threads_per_producer}}},
                       {"copy_engine", rin.copy_engine},
                       {"points", raw_points}};
    if (!failure.empty()) raw["failure"] = failure;
    write_output_file((fs::path(o.out_dir) / "raw.json").string(), raw.dump(1) + "\n", true);
    write_output_file((fs::path(o.out_dir) / "records.csv").string(), records_csv_text(fit_records(points)), true);
  };

  std::vector<model::ZeroGapLoop> zero_gap_loops;
  auto run_point = [&](const PlannedPoint& p, std::size_t index, std::size_t count) {
    bar.update(done_est, static_cast<int>(index), static_cast<int>(count), point_label(p), seconds_since(t_start));
    if (p.other_path && !other_runner)
      other_runner = std::make_unique<ProbeRunner>(
          team, o.buffer_bytes, o.path == StorePath::kNcclWindow ? StorePath::kPeerPointer : StorePath::kNcclWindow,
          o.threads_per_producer);
    ProbeRunner& r = p.other_path ? *other_runner : runner;
    ProbeResult res = r.run(to_config(p, o.store_bytes, o.threads_per_producer));
    nlohmann::json rj = res.to_json(true);
    rj["phase"] = to_string(p.phase);
    raw_points.push_back(rj);
    if (!res.verified()) {
      failure = "verification failed at " + point_label(p) + ": " + std::to_string(res.mismatches) + " of " +
                std::to_string(res.words_verified) + " words wrong; first: " + res.first_mismatch;
      return false;
    }
    points.push_back({res.to_record(), p.phase, p.mma_gap});
    // The zero-gap records' measured loop gaps (records.csv writes G = 0): the fit's R(K) sees them, as
    // `xstage fit --raw raw.json` does.
    if (p.phase == SweepPhase::kZeroGap && points.back().record.mode == model::BurstMode::kPeriodic)
      zero_gap_loops.push_back({points.back().record.target, points.back().record.producers,
                                points.back().record.bytes_per_producer, res.gap_s()});
    done_est += p.est_seconds;
    return true;
  };

  try {
    for (std::size_t i = 0; i < queue.size(); ++i) {
      const PlannedPoint& p = queue[i];
      if (seconds_since(t_start) + p.est_seconds > budget) {
        budget_hit = true;
        rin.notes.push_back("time budget of " + std::to_string(budget) + " s reached: " +
                            std::to_string(queue.size() - i) + " planned points not run");
        break;
      }
      if (!run_point(p, i + 1, queue.size())) break;
      if (p.phase == SweepPhase::kIsolated) {
        auto& ks = knee_search[p.producers];
        ks.producers = p.producers;
        ks.largest_volume_bytes = std::max<std::uint64_t>(ks.largest_volume_bytes, p.volume_bytes());
        const bool last_of_k = i + 1 == queue.size() || queue[i + 1].phase != SweepPhase::kIsolated ||
                               queue[i + 1].producers != p.producers || queue[i + 1].remote != p.remote;
        if (last_of_k) {
          // Extend V until a knee shows, the buffer limit is reached, or the budget runs out.
          if (knee_found_for(points, !remote, p.producers)) {
            ks.stopped_because = "knee found";
          } else {
            auto more = extend_isolated(so, p);
            if (more.empty()) {
              ks.stopped_because = "buffer limit reached (no knee up to it)";
            } else {
              double more_t = 0;
              for (auto& m : more) more_t += m.est_seconds;
              if (seconds_since(t_start) + more_t > budget) {
                ks.stopped_because = "time budget reached (no knee up to the largest V measured)";
              } else {
                queue.insert(queue.begin() + static_cast<std::ptrdiff_t>(i) + 1, more.begin(), more.end());
                total_est += more_t;
              }
            }
          }
        }
      }
    }
  } catch (const std::exception& e) {
    failure = e.what();
    bar.finish();
    save(false);
    throw;
  }
  bar.finish();
  if (!failure.empty()) {
    save(false);
    std::fprintf(stderr, "xstage calibrate: %s (raw.json and records.csv written to %s)\n", failure.c_str(),
                 o.out_dir.c_str());
    return 3;
  }
  save(!budget_hit);
  for (auto& [k, s] : knee_search) rin.knee_searches.push_back(s);

  // Fit once, on exactly the records written to records.csv.
  std::vector<model::CalibrationRecord> fit_in = fit_records(points);
  rin.fit_is_local_control = !remote;
  model::FitOptions fit_options;
  fit_options.zero_gap_loops = zero_gap_loops;
  fit_options.isolated_simulator = o.isolated_simulator;  // the caller's simulator (sim::isolated_issue_time_s)
  if (!remote) {
    fit_in = relabel_local_as_fit_input(fit_in);
    for (auto& l : fit_options.zero_gap_loops) l.target = model::StoreTarget::kRemote;
  }
  rin.fit = model::fit_platform(fit_in, fit_options);
  if (remote && o.path_check) {
    // Like for like: R through the other path vs R through the main path from the same (K, B) points
    // (R depends a little on K, so the all-points R is not the comparison).
    std::vector<model::CalibrationRecord> other, same;
    for (const auto& lp : points)
      if (lp.phase == SweepPhase::kPathCheck) other.push_back(lp.record);
    for (const auto& lp : points)
      if (lp.phase == SweepPhase::kZeroGap && lp.record.target == model::StoreTarget::kRemote)
        for (const auto& x : other)
          if (x.producers == lp.record.producers && x.bytes_per_producer == lp.record.bytes_per_producer)
            same.push_back(lp.record);
    try {
      rin.path_check_rate_bytes_per_s = model::fit_platform(other).rate.drain_rate_bytes_per_s;
      rin.path_check_main_rate_bytes_per_s = model::fit_platform(same).rate.drain_rate_bytes_per_s;
    } catch (const InputError& e) {
      rin.path_check_rate_bytes_per_s.reset();
      rin.notes.push_back(std::string("store-path cross-check not fitted: ") + e.what());
    }
  }
  model::Platform pf = rin.fit.platform;
  const std::string dev_name = provenance["devices"][0].value("name", std::string("GPU"));
  pf.name = remote ? "measured-" + std::to_string(team.world_size()) + "x-" + dev_name : "local-control-" + dev_name;
  for (auto& ch : pf.name)
    if (ch == ' ') ch = '-';
  pf.description = remote ? "Measured by xstage calibrate on " + std::to_string(team.world_size()) + " x " + dev_name +
                                " (remote stores, rank 0 -> rank 1, " + to_string(o.path) + ")"
                          : "NOT a remote platform: fit of local-target control stores on one " + dev_name +
                                " (no peer GPU was available)";
  pf.provenance = provenance;
  pf.provenance["source"] = "xstage calibrate";
  pf.provenance["measured_by_xstage"] = true;
  pf.provenance["remote"] = remote;
  pf.provenance["copy_engine_peer_gbps"] =
      rin.copy_engine_peer_gbps ? nlohmann::json(*rin.copy_engine_peer_gbps) : nlohmann::json(nullptr);
  const std::string pf_name = remote ? "platform.json" : "platform_local_control.json";
  write_output_file((fs::path(o.out_dir) / pf_name).string(), model::platform_to_json(pf).dump(2) + "\n", true);

  rin.points = points;
  rin.provenance = provenance;
  rin.provenance["elapsed_s"] = seconds_since(t_start);
  if (!remote) rin.notes.push_back("one GPU: no remote measurement was possible");
  nlohmann::json report = build_calibration_report(rin);
  write_output_file((fs::path(o.out_dir) / "report.json").string(), report.dump(2) + "\n", true);

  // Short summary on stderr.
  std::fprintf(stderr, "xstage calibrate: %zu points in %.1f s -> %s\n", points.size(), seconds_since(t_start),
               o.out_dir.c_str());
  std::fprintf(stderr, "  %s R = %.1f GB/s", remote ? "remote" : "LOCAL CONTROL (not remote):",
               rin.fit.platform.drain_rate_bytes_per_s / 1e9);
  if (rin.copy_engine_peer_gbps) std::fprintf(stderr, "  (copy engine %.1f GB/s)", *rin.copy_engine_peer_gbps);
  std::fprintf(stderr, "\n");
  for (const auto& c : report["checks"])
    std::fprintf(stderr, "  check %-40s %s\n", c["name"].get<std::string>().c_str(),
                 !c["applicable"].get<bool>() ? "n/a" : (c["pass"].get<bool>() ? "pass" : "FAIL"));

  if (o.plots) {
    const std::string script = find_plot_script(o.plot_script);
    if (script.empty()) {
      std::fprintf(stderr, "xstage calibrate: plots not made: bench/calibration/plot_calibration.py not found (set XSTAGE_PLOT_SCRIPT)\n");
    } else {
      const std::string cmd = "python3 '" + script + "' --dir '" + o.out_dir + "'";
      const int rc = std::system(cmd.c_str());
      if (rc != 0) std::fprintf(stderr, "xstage calibrate: plots not made: '%s' exited with %d\n", cmd.c_str(), rc);
    }
  }
  return 0;
}

}  // namespace xstage::probe
