// xstage calibrate: the standard remote-store sweep on GPUs → records.csv, platform.json, report.json,
// raw.json and the calibration plots.
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <memory>

#include "cli_common.hpp"
#include "cli_gpu.hpp"
#include <filesystem>
#include "registry.hpp"
#include "xstage/model/error.hpp"
#include "xstage/probe/calibrate.hpp"
#include "xstage/sim/simulator.hpp"

namespace xstage::cli {
namespace {

struct CalibrateCli {
  std::string gpus = "0,1";
  std::string path = "nccl-window";
  probe::CalibrateOptions opt;
  double buffer_mib = 2048;
};

void add_calibrate(CLI::App& root) {
  auto st = std::make_shared<CalibrateCli>();
  auto* cmd = root.add_subcommand(
      "calibrate",
      "Measure the platform: zero-gap periodic bursts over K and V, a gap sweep to the plateau, an isolated V sweep "
      "past the knee; fit M_X and compare the model with every point");
  add_gpus_option(cmd, st->gpus, "the first sends to the second (one GPU: local control only)");
  cmd->add_option("--out", st->opt.out_dir, "output folder (created if missing; its parent must exist)")->required();
  cmd->add_flag("--quick", st->opt.quick, "short sweep (under a minute)");
  add_force_option(cmd, st->opt.force, "overwrite the files of an earlier calibration in --out");
  cmd->add_option("--store-bytes", st->opt.store_bytes, "width of each store: 4, 8 or 16")->capture_default_str();
  cmd->add_option("--path", st->path, "store path of the main sweep: nccl-window or peer-pointer")->capture_default_str();
  cmd->add_flag("!--no-path-check", st->opt.path_check, "skip measuring R through the other store path");
  cmd->add_option("--time-budget", st->opt.time_budget_s, "seconds for the whole run (0: 50 quick, 540 full)")
      ->check(in_range(0, 86400));
  cmd->add_option("--buffer-mib", st->buffer_mib, "destination buffer per GPU, MiB (bounds the largest V)")
      ->capture_default_str();
  cmd->add_option("--threads", st->opt.threads_per_producer, "threads per producer CTA")->capture_default_str();
  cmd->add_flag("!--no-plots", st->opt.plots, "skip bench/calibration/plot_calibration.py");
  cmd->add_option("--plot-script", st->opt.plot_script, "path of plot_calibration.py");
  cmd->callback([st] {
    auto& o = st->opt;
    o.gpus = cli::parse_gpu_list("--gpus", st->gpus);
    o.path = probe::parse_store_path("--path", st->path);
    if (o.store_bytes != 4 && o.store_bytes != 8 && o.store_bytes != 16)
      throw InputError("--store-bytes: must be 4, 8 or 16, got " + std::to_string(o.store_bytes));
    if (!(st->buffer_mib >= 64 && st->buffer_mib <= 65536))
      throw InputError("--buffer-mib: must be within 64 .. 65536, got " + std::to_string(st->buffer_mib));
    if (o.threads_per_producer < 32 || o.threads_per_producer > 1024 || o.threads_per_producer % 32)
      throw InputError("--threads: a multiple of 32 within 32 .. 1024, got " + std::to_string(o.threads_per_producer));
    o.buffer_bytes = static_cast<std::uint64_t>(st->buffer_mib) << 20;
    // argc = 0: provenance reads the full command line from /proc/self/cmdline.
    o.argc = 0;
    o.argv = nullptr;
    o.isolated_simulator = sim::isolated_issue_time_s;  // the knee fitted for the simulator too, as `xstage fit` does
    namespace fs = std::filesystem;
    if (o.out_dir.empty()) throw InputError("--out: empty path");
    std::error_code ec;
    const fs::path out_dir(o.out_dir);
    const bool existed = fs::exists(out_dir, ec);
    if (existed && !fs::is_directory(out_dir, ec)) throw InputError("--out " + o.out_dir + ": is not a folder");
    if (!existed && out_dir.has_parent_path() && !fs::is_directory(out_dir.parent_path(), ec))
      throw InputError("--out " + o.out_dir + ": folder " + out_dir.parent_path().string() + " does not exist");
    require_cuda_devices("calibrate", o.gpus);
    // A folder this run created is removed again if the run fails before writing anything into it
    // (a failed sweep keeps the raw.json and records.csv it wrote).
    auto remove_if_created_and_empty = [&] {
      if (!existed && fs::is_directory(out_dir, ec) && fs::is_empty(out_dir, ec)) fs::remove(out_dir, ec);
    };
    int rc = 0;
    try {
      rc = probe::run_calibrate(o);
    } catch (...) {
      remove_if_created_and_empty();
      throw;
    }
    if (rc != 0) {
      remove_if_created_and_empty();
      throw CommandExit{rc};
    }
  });
}

}  // namespace
}  // namespace xstage::cli

XSTAGE_SUBCOMMAND(cmd_calibrate, "calibrate", 40, add_calibrate);
