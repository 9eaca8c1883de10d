// `xstage calibrate`: the standard sweep on real GPUs → records.csv, platform.json, report.json,
// raw.json and the Figure-3-style plots (bench/calibration/plot_calibration.py reads the JSON/CSV files).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "xstage/model/error.hpp"
#include "xstage/probe/probe.hpp"

namespace xstage::probe {

struct CalibrateOptions {
  std::vector<int> gpus{0};
  std::string out_dir;
  bool quick = false;
  bool force = false;
  int store_bytes = 16;
  StorePath path = StorePath::kNcclWindow;
  bool path_check = true;          // also measure R through the other store path (≥ 2 GPUs)
  double time_budget_s = 0;        // 0: 50 s (--quick) or 540 s
  std::uint64_t buffer_bytes = 2ull << 30;
  int threads_per_producer = 512;
  bool plots = true;
  std::string plot_script;         // empty: bench/calibration/plot_calibration.py found from the cwd or the source tree
  int argc = 0;
  char** argv = nullptr;
  // The simulator's isolated-burst prediction (model::FitOptions::isolated_simulator), so the knee is
  // fitted for the simulator too, as `xstage fit` does. The caller passes sim::isolated_issue_time_s:
  // the probe, a kernel library, does not link the simulator. Empty: the knee fitted for the model only.
  std::function<double(int, double, double, double, double, double)> isolated_simulator;
};

// Output file names, so tests and the plot script agree.
inline const std::vector<std::string>& calibrate_output_names() {
  static const std::vector<std::string> names = {"records.csv", "platform.json", "platform_local_control.json",
                                                 "report.json", "raw.json", "fig3_calibration.png"};
  return names;
}

// Runs the sweep and writes the files. Returns the process exit status (0, or 3 when a verification
// failed: the data is still written). Throws InputError / DeviceError.
int run_calibrate(const CalibrateOptions& options);

}  // namespace xstage::probe
