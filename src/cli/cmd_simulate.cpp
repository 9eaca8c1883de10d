// xstage simulate: event simulation of remote-store bursts against the platform's R and Q — K producers
// × periodic bursts (compared with the model), or any schedule from a file.
#include <iostream>
#include <optional>

#include "cli_common.hpp"
#include "plan_audits.hpp"
#include "registry.hpp"
#include "xstage/model/audit.hpp"
#include "xstage/model/kernel_description.hpp"
#include "xstage/model/units.hpp"
#include "xstage/model/error.hpp"
#include "xstage/planner/simulate.hpp"
#include "xstage/sim/burst_gap_kernel.hpp"
#include "xstage/sim/schedule_file.hpp"
#include "xstage/sim/simulator.hpp"
#include "xstage/sim/trace_events.hpp"

namespace xstage::cli {
namespace {

// The command's arguments are the planner's simulate request (xstage/planner/simulate.hpp), named by their flags
// in messages: the JSON output is the planner's, the one the C ABI returns. --trace stays with the CLI.
struct SimOptions : planner::SimulateRequest {
  SimOptions() { names = planner::ArgNames::kCliFlags; }
  bool json = false;
  std::string trace;  // --trace FILE: the timeline as Chrome trace-event JSON
  bool force = false;
};

// Work limit of --trace: every span of the timeline becomes one or two trace events (about
// kBytesPerTraceSpan each, JSON document and text together, measured), checked before simulating.
constexpr double kMaxTraceSpans = 1 << 19;
constexpr double kBytesPerTraceSpan = 1900;

// --trace: the output path and the timeline's work checked before simulating, the timeline recorded.
planner::SimulateHooks trace_hooks(const SimOptions& o) {
  planner::SimulateHooks hooks;
  if (o.trace.empty()) return hooks;
  hooks.record_timeline = true;
  hooks.before_simulating = [&o](double spans, const std::string& work) {
    check_output_path("--trace", o.trace, o.force, {o.platform, o.schedule, o.kernel});
    require_work_within("simulate --trace: " + work, spans, kMaxTraceSpans, "timeline spans", kBytesPerTraceSpan);
  };
  return hooks;
}

// --trace: the timeline of `r` (recorded with SimConfig::record_timeline) as a Chrome trace, one thread
// per producer, written like every other output file.
void write_trace(const SimOptions& o, const sim::SimResult& r, const model::Platform& platform, nlohmann::json run) {
  if (o.trace.empty()) return;
  // Checked again on what the simulation recorded: every span and every path-occupancy sample is a trace event.
  require_work_within("simulate --trace: the recorded timeline",
                      static_cast<double>(r.timeline.size() + r.occupancy.size()), kMaxTraceSpans,
                      "timeline spans and counter samples", kBytesPerTraceSpan);
  stamp_json(run, "xstage.simulate/1", o.platform, platform);
  const nlohmann::json trace = sim::chrome_trace(r, {}, run);
  write_file_atomically(o.trace, trace.dump() + "\n", o.force, {o.platform, o.schedule, o.kernel}, "--trace");
}

// A schedule from a file: every producer's bursts, aggregated by index in the table.
void run_schedule_file(const SimOptions& o) {
  const planner::ScheduleSimulation s = planner::simulate_schedule(o, trace_hooks(o));
  const sim::SimResult& r = s.result;
  const int k = s.producers;
  write_trace(o, r, s.platform,
              {{"schedule", o.schedule}, {"producers", k}, {"completion_coupled", o.completion_coupled},
               {"drain_rate_gbps", units::bytes_per_s_to_gbps(s.config.drain_rate_bytes_per_s)},
               {"capacity_bytes", s.config.capacity_bytes}});
  if (o.json) {
    print_json(planner::to_json(o, s));
    return;
  }
  out_stream() << "simulated " << o.schedule << ": " << k << " producers, " << r.bursts.size() << " bursts on "
            << platform_label(o.platform, s.platform) << (o.completion_coupled ? " (completion-coupled)" : "") << "\n";
  print_table({"", "value"},
              {{"makespan (us)", fmt_us(r.makespan_s, 3)},
               {"total issue stall, all producers (us)", fmt_us(r.total_stall_s, 3)},
               {"peak outstanding (MiB)", fmt_mib(r.peak_outstanding_bytes, 3) + " of Q = " + fmt_mib(s.config.capacity_bytes, 3)}});
  if (!o.per_burst) return;
  std::vector<std::vector<std::string>> rows;
  const auto agg = sim::aggregate_by_index(r, k);
  for (std::size_t i = 0; i < agg.size(); ++i)
    rows.push_back({std::to_string(i), fmt_us(agg[i].start_s, 3), fmt_us(agg[i].issue_end_s - agg[i].start_s, 3)});
  print_table({"burst", "first start us", "T_iss (all producers) us"}, rows);
}

// A burst-gap kernel description: its schedules simulated, per tile kind the stalls and the design test in
// the words of `xstage plan`, the makespan against the same schedules without backpressure.
void run_kernel(const SimOptions& o) {
  const planner::KernelSimulation s = planner::simulate_kernel(o, trace_hooks(o));
  const model::BurstGapKernel& k = s.kernel;
  const sim::BurstGapOutcome& r = s.outcome;
  const int producers = s.producers;
  const bool roles = s.roles;
  if (!o.trace.empty()) {
    std::vector<sim::TraceTrack> tracks;
    for (int role = 0; role < (roles ? 2 : 1); ++role)
      for (int c = 0; c < producers; ++c)
        tracks.push_back({0, k.name, role * producers + c,
                          "CTA " + std::to_string(c) + (roles ? (role ? " epilogue issuer" : " producer") : "")});
    nlohmann::json meta = planner::kernel_run_json(s);
    stamp_json(meta, "xstage.simulate.kernel/1", o.platform, s.platform);
    write_file_atomically(o.trace, sim::chrome_trace(s.timeline, tracks, meta).dump() + "\n", o.force,
                          {o.platform, o.kernel}, "--trace");
  }
  const std::vector<plan::ActOn>& acts = s.act_on;
  const double over = r.free_makespan_s > 0 ? r.makespan_s / r.free_makespan_s - 1.0 : 0.0;
  if (o.json) {
    print_json(planner::to_json(o, s));
    return;
  }
  out_stream() << "kernel " << k.name << (k.description.empty() ? "" : ": " + k.description) << "\n";
  for (const auto& a : k.assumptions) out_stream() << "  assumes: " << a << "\n";
  out_stream() << "simulated on " << platform_label(o.platform, s.platform) << ": K = " << producers << " producers x "
               << k.tiles_per_producer() << " tiles, issue " << k.issue
               << (roles ? " (" + std::to_string(k.cover_slots) + " slots)" : "")
               << (k.issue == "piggyback" ? " (" + std::to_string(k.chunks) + " chunks)" : "") << ", staging "
               << fmt_num(k.staging_us, 2) << " us, R(K=" << producers
               << ") = " << fmt_num(units::bytes_per_s_to_gbps(r.drain_rate_bytes_per_s), 1) << " GB/s, Q = "
               << fmt_mib(r.capacity_bytes, 2) << " MiB\n";
  out_stream() << "makespan " << fmt_us(r.makespan_s, 2) << " us vs " << fmt_us(r.free_makespan_s, 2)
               << " us with no backpressure (+" << fmt_num(100.0 * over, 2) << " %); stall per period (one pass over the "
               << "tiles, median producer" << (k.repeat > 1 ? ", second half of the repeats" : "") << ") "
               << fmt_us(r.steady_stall_per_period_s, 2) << " us\n";
  std::vector<std::vector<std::string>> rows;
  for (std::size_t i = 0; i < r.kinds.size(); ++i) {
    const auto& kind = r.kinds[i];
    const bool stores = kind.burst_bytes > 0;
    std::vector<std::string> row = {kind.name, std::to_string(kind.tiles), stores ? fmt_num(kind.burst_bytes / 1024, 1) : "-",
                                    stores ? fmt_us(kind.t_iss0_s, 3) : "-", stores ? fmt_us(kind.gap_s, 2) : "-",
                                    stores ? fmt_us(kind.median_stall_s, 2) + "/" + fmt_us(kind.max_stall_s, 2) : "-"};
    if (roles)
      row.push_back(fmt_us(kind.median_slot_wait_s, 2) + "/" + fmt_us(kind.max_slot_wait_s, 2) +
                    (stores ? ", " + fmt_us(kind.median_span_s, 2) : ""));
    row.push_back(stores ? plan::verdict_text(kind.aligned) : "-");
    row.push_back(stores ? acts[i].text : "no remote stores");
    rows.push_back(row);
  }
  std::vector<std::string> header = {"tile", "tiles", "burst KiB", "T_iss0 us", "G us", "burst stall med/max us"};
  if (roles) header.push_back("slot wait med/max, T_RS us");
  header.push_back("aligned (eq. 10)");
  header.push_back("act on");
  plan::left_align(header, rows, {header.size() - 2, header.size() - 1});
  print_table(header, rows);
  out_stream() << "  burst: one producer's burst (a chunk when piggybacked); G: eq. 10's gap after it with no stall\n"
                  "  burst stall: per tile, its bursts' issue time beyond T_iss0 (simulated, all producers)\n";
  if (roles)
    out_stream() << "  slot wait: the producer's wait for a free accumulator slot at the tile's entry (eq. 15's "
                    "[T_RS - T_cover]+); T_RS: staging + issue on the epilogue issuer\n";
  out_stream() << "  aligned (eq. 10): all K producers' bursts at once, context; act on: the simulated kernel's verdict "
                  "(keep: the stores drain under the gap; reshape: they stall every period)\n";
  if (!o.trace.empty()) out_stream() << "trace: " << o.trace << " (Perfetto / chrome://tracing)\n";
}

void run_simulate(const SimOptions& o) {
  if (!o.kernel.empty()) return run_kernel(o);
  if (!o.schedule.empty()) return run_schedule_file(o);
  const planner::PeriodicSimulation s = planner::simulate_periodic(o, trace_hooks(o));
  const sim::SimResult& r = s.result;
  const sim::SteadyState& ss = s.steady;
  const std::vector<double>& start = s.start_s;
  const std::vector<double>& end = s.issue_end_s;
  write_trace(o, r, s.platform,
              {{"producers", o.producers}, {"bytes_per_producer", o.bytes_per_producer}, {"gap_us", o.gap_us},
               {"bursts_per_producer", o.bursts}, {"completion_coupled", o.completion_coupled},
               {"t_iss0_us", units::s_to_us(s.model.t_iss0_s)},
               {"drain_rate_gbps", units::bytes_per_s_to_gbps(s.config.drain_rate_bytes_per_s)},
               {"capacity_bytes", s.config.capacity_bytes}});
  if (o.json) {
    print_json(planner::to_json(o, s));
    return;
  }
  const double model_t_iss = s.model.t_iss_s;
  const double model_period = s.model_period_s;
  out_stream() << "simulated " << o.bursts << " bursts of " << o.producers << " x " << fmt_num(o.bytes_per_producer, 0)
            << " B, gap " << fmt_num(o.gap_us, 3) << " us on " << platform_label(o.platform, s.platform)
            << (o.completion_coupled ? " (completion-coupled)" : "") << "\n";
  print_table({"", "simulated", "model"},
              {{"steady T_iss (us)", fmt_us(ss.issue_time_s, 3), fmt_us(model_t_iss, 3)},
               {"steady period (us)", fmt_us(ss.period_s, 3), fmt_us(model_period, 3)},
               {"peak outstanding (MiB)", fmt_mib(r.peak_outstanding_bytes, 3), fmt_mib(s.config.capacity_bytes, 3) + " (Q)"}});
  if (!o.per_burst) return;
  std::vector<std::vector<std::string>> rows;
  for (int i = 0; i < o.bursts; ++i)
    rows.push_back({std::to_string(i), fmt_us(start[i], 3), fmt_us(end[i] - start[i], 3),
                    i + 1 < o.bursts ? fmt_us(start[i + 1] - start[i], 3) : "", fmt_us(end[i] - start[i] - s.model.t_iss0_s, 3)});
  print_table({"burst", "start us", "T_iss us", "period us", "stall us"}, rows);
}

void add_simulate(CLI::App& root) {
  auto o = std::make_shared<SimOptions>();
  CLI::App* cmd = root.add_subcommand("simulate", "Event-simulate periodic bursts against the platform's drain rate and capacity");
  add_platform_option(cmd, o->platform);
  CLI::Option* schedule = cmd->add_option("--schedule", o->schedule, "schedule file (xstage.schedule/1) instead of periodic bursts")
                              ->check(CLI::ExistingFile);
  CLI::Option* kernel =
      cmd->add_option("--kernel", o->kernel,
                      "burst-gap kernel description (xstage.kernel/1, kind \"burst_gap\"; docs/kernel_description.md): "
                      "per tile kind the burst stalls and the design test")
          ->check(CLI::ExistingFile)
          ->excludes(schedule);
  cmd->add_option("--producers", o->producers, "K: producers")->check(kPositive)->check(kProducerCount)->excludes(schedule)->excludes(kernel);
  cmd->add_option("--bytes-per-producer", o->bytes_per_producer, "B: bytes per producer per burst")
      ->check(kPositive)->check(kByteCount)->excludes(schedule)->excludes(kernel);
  cmd->add_option("--gap-us", o->gap_us, "G: gap after each burst (us)")->check(in_range(0, kMaxGapUs))->excludes(schedule)->excludes(kernel);
  cmd->add_option("--bursts", o->bursts, "number of bursts per producer")->check(in_range(2, 100000))->excludes(schedule)->excludes(kernel);
  cmd->add_option("--t-iss0-us", o->t_iss0_us, "Override T_iss0 (us)")->check(kPositive)->check(kDurationUs)->excludes(schedule)->excludes(kernel);
  cmd->add_option("--capacity-bytes", o->capacity_bytes, "Override Q (bytes)")->check(kPositive)->check(kByteCount)->excludes(kernel);
  cmd->add_flag("--completion-coupled", o->completion_coupled, "issuer waits for remote completion after each burst")
      ->excludes(kernel);
  cmd->add_option("--latency-us", o->latency_us, "fixed completion latency in completion-coupled mode (us)")
      ->check(kNonNegative)->check(kDurationUs)->excludes(kernel);
  cmd->add_flag("--per-burst", o->per_burst, "also list every burst (table rows, or \"bursts\" in the JSON)")->excludes(kernel);
  add_json_option(cmd, o->json);
  cmd->add_option("--trace", o->trace,
                  "Also write the simulated timeline as Chrome trace-event JSON (Perfetto, chrome://tracing): one "
                  "thread per producer; mainloops, epilogue stores and stalls, waits, the path's outstanding bytes "
                  "(refused if it exists, unless --force)")
      ->check(kOutputPath);
  add_force_option(cmd, o->force, "Replace --trace if it exists");
  cmd->callback([o] { run_simulate(*o); });
}

}  // namespace
}  // namespace xstage::cli

XSTAGE_SUBCOMMAND(cmd_simulate, "simulate", 35, add_simulate);
