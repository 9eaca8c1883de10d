// `simulate` as planner functions: periodic bursts of K producers (compared with the model), a schedule file, or a
// burst-gap kernel description (xstage.kernel/1, kind "burst_gap"), each simulated against the platform's R and Q.
// The CLI prints its table or JSON from these results; the C ABI and the Python planner return the JSON
// (simulate_json), the object `xstage simulate --json` prints. Output files (--trace) stay with the CLI, which
// records the timeline through SimulateHooks.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "xstage/model/audit.hpp"
#include "xstage/model/kernel_description.hpp"
#include "xstage/model/platform.hpp"
#include "xstage/planner/verdict_words.hpp"
#include "xstage/sim/burst_gap_kernel.hpp"
#include "xstage/sim/simulator.hpp"

namespace xstage::planner {

// How messages name an argument: by its request key ("bytes_per_producer", the C ABI and Python) or by the CLI's
// flag ("--bytes-per-producer").
enum class ArgNames { kRequestKeys, kCliFlags };
std::string arg_name(ArgNames names, const std::string& key);

struct SimulateRequest {
  std::string platform;  // empty: the embedded platform
  int producers = 0;     // periodic bursts: K, B and G (0: not given)
  double bytes_per_producer = 0;
  double gap_us = 0;
  int bursts = 50;
  std::optional<double> t_iss0_us;
  std::optional<double> capacity_bytes;
  bool completion_coupled = false;
  double latency_us = 0;
  std::string schedule;  // a schedule file (xstage.schedule/1) instead of periodic bursts
  std::string kernel;    // a burst-gap kernel description instead
  bool per_burst = false;
  ArgNames names = ArgNames::kRequestKeys;
};

// What the CLI adds around a simulation: a check of the timeline's work before simulating (`spans` trace spans,
// `work` the request in words, "--producers 4 x --bursts 50 x 3 spans (...)") and the timeline recorded.
struct SimulateHooks {
  std::function<void(double spans, const std::string& work)> before_simulating;
  bool record_timeline = false;
};

// Periodic bursts: K producers x `bursts` bursts of B bytes, gap G; steady state against the model (eq. 3-7).
struct PeriodicSimulation {
  model::Platform platform;
  model::BurstGapAudit model;
  sim::SimConfig config;
  sim::SimResult result;
  sim::SteadyState steady;
  std::vector<double> start_s, issue_end_s;  // per burst index, all producers
  double model_period_s = 0;                 // completion-coupled or not, as simulated
};
PeriodicSimulation simulate_periodic(const SimulateRequest& r, const SimulateHooks& hooks = {});

// A schedule file: every producer's bursts as written.
struct ScheduleSimulation {
  model::Platform platform;
  int producers = 0;
  sim::SimConfig config;
  sim::SimResult result;
};
ScheduleSimulation simulate_schedule(const SimulateRequest& r, const SimulateHooks& hooks = {});

// A burst-gap kernel description: per tile kind the stalls and the design test in the words of `plan`.
struct KernelSimulation {
  model::Platform platform;
  model::BurstGapKernel kernel;
  int producers = 0;
  bool roles = false;  // an epilogue issuer beside each producer
  sim::BurstGapOutcome outcome;
  sim::SimResult timeline;    // with hooks.record_timeline
  std::vector<ActOn> act_on;  // per tile kind
};
KernelSimulation simulate_kernel(const SimulateRequest& r, const SimulateHooks& hooks = {});

// The JSON outputs (xstage.simulate/1, xstage.simulate.kernel/1), stamped.
nlohmann::json to_json(const SimulateRequest& r, const PeriodicSimulation& s);
nlohmann::json to_json(const SimulateRequest& r, const ScheduleSimulation& s);
nlohmann::json to_json(const SimulateRequest& r, const KernelSimulation& s);
// The kernel run's inputs (the head of its JSON output, also the trace's metadata).
nlohmann::json kernel_run_json(const KernelSimulation& s);

// Whichever of the three the request names, its JSON output.
nlohmann::json simulate_output(const SimulateRequest& r);

}  // namespace xstage::planner
