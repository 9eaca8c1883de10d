// `simulate` as planner functions (simulate.hpp).
#include "xstage/planner/simulate.hpp"

#include <cstdio>

#include "xstage/model/error.hpp"
#include "xstage/model/units.hpp"
#include "xstage/model/work_limit.hpp"
#include "xstage/planner/requests.hpp"
#include "xstage/sim/schedule_file.hpp"
#include "xstage/sim/simulator.hpp"

namespace xstage::planner {

namespace {

using units::s_to_us;

// Work limit of the periodic simulation: its events and per-burst records grow with producers x bursts
// (about kBytesPerProducerBurst each, measured), checked before anything is allocated.
constexpr double kMaxProducerBursts = 1 << 24;
constexpr double kBytesPerProducerBurst = 96;

std::string count_text(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f", x);
  return buf;
}

void before_simulating(const SimulateHooks& hooks, double spans, const std::string& work) {
  if (hooks.before_simulating) hooks.before_simulating(spans, work);
}

sim::SimConfig sim_config(const SimulateRequest& r, const model::Platform& platform, double drain_rate_bytes_per_s,
                          double capacity_bytes, bool record_timeline) {
  sim::SimConfig cfg;
  cfg.drain_rate_bytes_per_s = drain_rate_bytes_per_s;
  cfg.capacity_bytes = capacity_bytes;
  cfg.drain_ramp_s = platform.knee_ramp_s;
  cfg.completion_coupled = r.completion_coupled;
  cfg.completion_latency_s = units::us_to_s(r.latency_us);
  cfg.time_limit_s = sim::kMaxSimulatedTimeS;
  cfg.record_timeline = record_timeline;
  return cfg;
}

}  // namespace

std::string arg_name(ArgNames names, const std::string& key) {
  if (names == ArgNames::kRequestKeys) return key;
  std::string flag = "--" + key;
  for (char& c : flag) c = c == '_' ? '-' : c;
  return flag;
}

PeriodicSimulation simulate_periodic(const SimulateRequest& r, const SimulateHooks& hooks) {
  const auto name = [&](const char* key) { return arg_name(r.names, key); };
  if (r.producers <= 0 || r.bytes_per_producer <= 0)
    throw InputError(name("producers") + " and " + name("bytes_per_producer") + " are required without " +
                     name("schedule"));
  require_work_within("simulate: " + name("producers") + " " + std::to_string(r.producers) + " x " + name("bursts") +
                          " " + std::to_string(r.bursts),
                      static_cast<double>(r.producers) * r.bursts, kMaxProducerBursts, "producer-bursts",
                      kBytesPerProducerBurst);
  before_simulating(hooks, 3.0 * r.producers * r.bursts,
                    name("producers") + " " + std::to_string(r.producers) + " x " + name("bursts") + " " +
                        std::to_string(r.bursts) + " x 3 spans (burst, gap, completion wait)");
  PeriodicSimulation s;
  s.platform = model::load_platform_or_default(r.platform);
  model::BurstGapInput in{r.producers, r.bytes_per_producer, units::us_to_s(r.gap_us), std::nullopt, r.capacity_bytes};
  if (r.t_iss0_us) in.t_iss0_override_s = units::us_to_s(*r.t_iss0_us);
  s.model = model::audit_burst_gap(s.platform, in);
  // R(K) and Q as the model has them
  s.config = sim_config(r, s.platform, s.model.drain_rate_bytes_per_s, s.model.capacity_bytes, hooks.record_timeline);
  const auto schedules = sim::periodic_schedules(r.producers, r.bytes_per_producer, s.model.t_iss0_s, in.gap_s, r.bursts);
  try {
    s.result = sim::simulate(s.config, schedules);
  } catch (const sim::TimeLimitError& e) {
    throw InputError(std::string(e.what()) + " (the schedule is sized by " + name("producers") + ", " +
                     name("bytes_per_producer") + ", " + name("gap_us") + ", " + name("bursts") +
                     (r.completion_coupled ? " and " + name("latency_us") : std::string()) + ": give smaller values)");
  }
  s.steady = sim::producer_steady_state(s.result, r.producers);
  for (const auto& b : sim::aggregate_by_index(s.result, r.producers)) {
    s.start_s.push_back(b.start_s);
    s.issue_end_s.push_back(b.issue_end_s);
  }
  s.model_period_s = r.completion_coupled ? s.model.completion_coupled_period_s : s.model.period_s;
  return s;
}

ScheduleSimulation simulate_schedule(const SimulateRequest& r, const SimulateHooks& hooks) {
  ScheduleSimulation s;
  s.platform = model::load_platform_or_default(r.platform);
  const std::vector<sim::ProducerSchedule> schedules = sim::load_schedule_file(r.schedule, s.platform);
  s.producers = static_cast<int>(schedules.size());
  double steps = 0;
  for (const auto& p : schedules) steps += static_cast<double>(p.size());
  before_simulating(hooks, steps, count_text(steps) + " schedule steps in " + r.schedule);
  s.config = sim_config(r, s.platform, s.platform.drain_rate_at(s.producers),
                        r.capacity_bytes ? *r.capacity_bytes : s.platform.capacity_bytes(s.producers).value,
                        hooks.record_timeline);
  s.result = sim::simulate(s.config, schedules);
  return s;
}

KernelSimulation simulate_kernel(const SimulateRequest& r, const SimulateHooks& hooks) {
  const std::string kernel = arg_name(r.names, "kernel");
  KernelSimulation s;
  s.platform = model::load_platform_or_default(r.platform);
  const model::KernelSource src = model::kernel_source(r.kernel);
  if (model::kernel_kind(src.json, src.origin) != "burst_gap")
    throw InputError(kernel + ": " + src.origin + " describes a MoE layer (kind \"moe\"): xstage plan moe " + kernel +
                     " simulates it; simulate " + kernel + " takes kind \"burst_gap\"");
  s.kernel = model::burst_gap_kernel_from_json(src.json, src.origin, sim::kMaxScheduleSteps);
  const model::BurstGapKernel& k = s.kernel;
  s.producers = k.producers > 0 ? k.producers : platform_max_producers(s.platform);
  sim::check_burst_gap_work(k, s.producers, src.origin);
  before_simulating(hooks, sim::burst_gap_schedule_steps(k, s.producers),
                    std::to_string(s.producers) + " producers x " + std::to_string(k.tiles_per_producer()) +
                        " tiles in " + src.origin);
  s.outcome = sim::simulate_burst_gap_kernel(s.platform, k, s.producers, hooks.record_timeline ? &s.timeline : nullptr);
  s.roles = k.issue == "epilogue_issuer";
  // Per tile kind: the as-built verdict (what the producer loses per tile) in the words of `plan`.
  const std::string cover = s.roles ? "the cover window (the mainloops the producer runs ahead)"
                            : k.issue == "piggyback" ? "the next tile's mainloop (chunks at its k-steps)"
                                                     : "the next mainloop";
  for (const auto& kind : s.outcome.kinds) s.act_on.push_back(act_on(kind.as_built, kind.name + " tile", cover));
  return s;
}

nlohmann::json to_json(const SimulateRequest& r, const PeriodicSimulation& s) {
  nlohmann::json j = {{"producers", r.producers},
                      {"bytes_per_producer", r.bytes_per_producer},
                      {"gap_us", r.gap_us},
                      {"completion_coupled", r.completion_coupled},
                      {"t_iss0_us", s_to_us(s.model.t_iss0_s)},
                      {"drain_rate_gbps", units::bytes_per_s_to_gbps(s.config.drain_rate_bytes_per_s)},
                      {"capacity_bytes", s.config.capacity_bytes},
                      {"steady_t_iss_us", s_to_us(s.steady.issue_time_s)},
                      {"steady_period_us", s_to_us(s.steady.period_s)},
                      {"model_t_iss_us", s_to_us(s.model.t_iss_s)},
                      {"model_period_us", s_to_us(s.model_period_s)},
                      {"peak_outstanding_bytes", s.result.peak_outstanding_bytes},
                      {"makespan_us", s_to_us(s.result.makespan_s)},
                      {"bursts_per_producer", r.bursts}};
  stamp_output(j, "xstage.simulate/1", r.platform, s.platform);
  if (r.per_burst) j["bursts"] = nlohmann::json::array();
  for (int i = 0; r.per_burst && i < r.bursts; ++i) {
    nlohmann::json b = {{"index", i},
                        {"start_us", s_to_us(s.start_s[i])},
                        {"t_iss_us", s_to_us(s.issue_end_s[i] - s.start_s[i])},
                        {"stall_us", s_to_us(s.issue_end_s[i] - s.start_s[i] - s.model.t_iss0_s)}};
    if (i + 1 < r.bursts) b["period_us"] = s_to_us(s.start_s[i + 1] - s.start_s[i]);
    j["bursts"].push_back(b);
  }
  return j;
}

nlohmann::json to_json(const SimulateRequest& r, const ScheduleSimulation& s) {
  const sim::SimResult& res = s.result;
  nlohmann::json j = {{"schedule", r.schedule},
                      {"producers", s.producers},
                      {"completion_coupled", r.completion_coupled},
                      {"drain_rate_gbps", units::bytes_per_s_to_gbps(s.config.drain_rate_bytes_per_s)},
                      {"capacity_bytes", s.config.capacity_bytes},
                      {"makespan_us", s_to_us(res.makespan_s)},
                      {"total_stall_us", s_to_us(res.total_stall_s)},
                      {"total_completion_wait_us", s_to_us(res.total_completion_wait_s)},
                      {"peak_outstanding_bytes", res.peak_outstanding_bytes},
                      {"bursts_simulated", res.bursts.size()}};
  stamp_output(j, "xstage.simulate/1", r.platform, s.platform);
  if (r.per_burst) {
    j["bursts"] = nlohmann::json::array();
    for (const auto& b : res.bursts)
      j["bursts"].push_back({{"producer", b.producer}, {"index", b.index}, {"start_us", s_to_us(b.start_s)},
                             {"t_iss_us", s_to_us(b.issue_time_s())}, {"stall_us", s_to_us(b.stall_s())}});
  }
  return j;
}

nlohmann::json kernel_run_json(const KernelSimulation& s) {
  return {{"kernel", model::to_json(s.kernel)},
          {"producers", s.producers},
          {"drain_rate_gbps", units::bytes_per_s_to_gbps(s.outcome.drain_rate_bytes_per_s)},
          {"capacity_bytes", s.outcome.capacity_bytes}};
}

nlohmann::json to_json(const SimulateRequest& r, const KernelSimulation& s) {
  const sim::BurstGapOutcome& o = s.outcome;
  nlohmann::json j = kernel_run_json(s);
  j.update({{"issue", s.kernel.issue},
            {"makespan_us", s_to_us(o.makespan_s)},
            {"no_backpressure_makespan_us", s_to_us(o.free_makespan_s)},
            {"steady_stall_per_period_us", s_to_us(o.steady_stall_per_period_s)},
            {"total_stall_us", s_to_us(o.total_stall_s)},
            {"peak_outstanding_bytes", o.peak_outstanding_bytes},
            {"tile_kinds", nlohmann::json::array()}});
  for (std::size_t i = 0; i < o.kinds.size(); ++i) {
    const auto& kind = o.kinds[i];
    nlohmann::json kj = {{"name", kind.name},
                         {"tiles", kind.tiles},
                         {"burst_bytes", kind.burst_bytes},
                         {"median_stall_us", s_to_us(kind.median_stall_s)},
                         {"max_stall_us", s_to_us(kind.max_stall_s)}};
    if (s.roles) {
      kj["median_slot_wait_us"] = s_to_us(kind.median_slot_wait_s);
      kj["max_slot_wait_us"] = s_to_us(kind.max_slot_wait_s);
      kj["median_span_us"] = s_to_us(kind.median_span_s);
    }
    if (kind.burst_bytes > 0) {
      kj["t_iss0_us"] = s_to_us(kind.t_iss0_s);
      kj["gap_us"] = s_to_us(kind.gap_s);
      kj["aligned"] = {{"action", model::to_string(kind.aligned.action)},
                       {"rate_bound_ok", kind.aligned.rate_bound_ok},
                       {"capacity_bound_ok", kind.aligned.capacity_bound_ok},
                       {"text", verdict_text(kind.aligned)}};
      kj["as_built"] = as_built_json(kind.as_built);
      kj["act_on"] = to_json(s.act_on[i]);
    }
    j["tile_kinds"].push_back(kj);
  }
  stamp_output(j, "xstage.simulate.kernel/1", r.platform, s.platform);
  return j;
}

nlohmann::json simulate_output(const SimulateRequest& r) {
  if (!r.kernel.empty()) return to_json(r, simulate_kernel(r));
  if (!r.schedule.empty()) return to_json(r, simulate_schedule(r));
  return to_json(r, simulate_periodic(r));
}

}  // namespace xstage::planner
