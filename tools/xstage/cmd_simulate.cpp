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
#include "xstage/sim/burst_gap_kernel.hpp"
#include "xstage/sim/schedule_file.hpp"
#include "xstage/sim/simulator.hpp"
#include "xstage/sim/trace_events.hpp"

namespace xstage::cli {
namespace {

struct SimOptions {
  std::string platform;
  int producers = 0;
  double bytes_per_producer = 0;
  double gap_us = 0;
  int bursts = 50;
  std::optional<double> t_iss0_us;
  std::optional<double> capacity_bytes;
  bool completion_coupled = false;
  double latency_us = 0;
  std::string schedule;
  std::string kernel;  // --kernel FILE: a burst-gap kernel description (xstage.kernel/1, kind "burst_gap")
  bool per_burst = false;
  bool json = false;
  std::string trace;  // --trace FILE: the timeline as Chrome trace-event JSON
  bool force = false;
};

// Work limit of the periodic simulation: its events and per-burst records grow with producers x bursts
// (about kBytesPerProducerBurst each, measured), checked before anything is allocated.
constexpr double kMaxProducerBursts = 1 << 24;
constexpr double kBytesPerProducerBurst = 96;
// Work limit of --trace: every span of the timeline becomes one or two trace events (about
// kBytesPerTraceSpan each, JSON document and text together, measured), checked before simulating.
constexpr double kMaxTraceSpans = 1 << 19;
constexpr double kBytesPerTraceSpan = 1900;

// --trace: the timeline of `r` (recorded with SimConfig::record_timeline) as a Chrome trace, one thread
// per producer, written like every other output file.
void write_trace(const SimOptions& o, const sim::SimResult& r, const model::Platform& platform, nlohmann::json run) {
  if (o.trace.empty()) return;
  stamp_json(run, "xstage.simulate/1", o.platform, platform);
  const nlohmann::json trace = sim::chrome_trace(r, {}, run);
  write_file_atomically(o.trace, trace.dump() + "\n", o.force, {o.platform, o.schedule, o.kernel}, "--trace");
}

void check_trace_work(const SimOptions& o, double spans, const std::string& request) {
  if (o.trace.empty()) return;
  check_output_path("--trace", o.trace, o.force, {o.platform, o.schedule, o.kernel});
  require_work_within(request, spans, kMaxTraceSpans, "timeline spans", kBytesPerTraceSpan);
}

// A schedule from a file: every producer's bursts, aggregated by index in the table.
void run_schedule_file(const SimOptions& o) {
  using units::s_to_us;
  const model::Platform platform = model::load_platform_or_default(o.platform);
  const std::vector<sim::ProducerSchedule> schedules = sim::load_schedule_file(o.schedule, platform);
  const int k = static_cast<int>(schedules.size());
  double steps = 0;
  for (const auto& s : schedules) steps += static_cast<double>(s.size());
  check_trace_work(o, steps, "simulate --trace: " + fmt_num(steps, 0) + " schedule steps in " + o.schedule);
  sim::SimConfig cfg;
  cfg.drain_rate_bytes_per_s = platform.drain_rate_at(k);
  cfg.capacity_bytes = o.capacity_bytes ? *o.capacity_bytes : platform.capacity_bytes(k).value;
  cfg.drain_ramp_s = platform.knee_ramp_s;
  cfg.completion_coupled = o.completion_coupled;
  cfg.completion_latency_s = units::us_to_s(o.latency_us);
  cfg.time_limit_s = 1e3;
  cfg.record_timeline = !o.trace.empty();
  const sim::SimResult r = sim::simulate(cfg, schedules);
  write_trace(o, r, platform,
              {{"schedule", o.schedule}, {"producers", k}, {"completion_coupled", o.completion_coupled},
               {"drain_rate_gbps", units::bytes_per_s_to_gbps(cfg.drain_rate_bytes_per_s)},
               {"capacity_bytes", cfg.capacity_bytes}});
  if (o.json) {
    nlohmann::json j = {{"schedule", o.schedule}, {"producers", k},
                        {"completion_coupled", o.completion_coupled},
                        {"drain_rate_gbps", units::bytes_per_s_to_gbps(cfg.drain_rate_bytes_per_s)},
                        {"capacity_bytes", cfg.capacity_bytes}, {"makespan_us", s_to_us(r.makespan_s)},
                        {"total_stall_us", s_to_us(r.total_stall_s)},
                        {"total_completion_wait_us", s_to_us(r.total_completion_wait_s)},
                        {"peak_outstanding_bytes", r.peak_outstanding_bytes}, {"bursts_simulated", r.bursts.size()}};
    stamp_json(j, "xstage.simulate/1", o.platform, platform);
    if (o.per_burst) j["bursts"] = nlohmann::json::array();
    for (const auto& b : o.per_burst ? r.bursts : std::vector<sim::BurstRecord>{})
      j["bursts"].push_back({{"producer", b.producer}, {"index", b.index}, {"start_us", s_to_us(b.start_s)},
                             {"t_iss_us", s_to_us(b.issue_time_s())}, {"stall_us", s_to_us(b.stall_s())}});
    print_json(j);
    return;
  }
  out_stream() << "simulated " << o.schedule << ": " << k << " producers, " << r.bursts.size() << " bursts on "
            << platform_label(o.platform, platform) << (o.completion_coupled ? " (completion-coupled)" : "") << "\n";
  print_table({"", "value"},
              {{"makespan (us)", fmt_us(r.makespan_s, 3)},
               {"total issue stall, all producers (us)", fmt_us(r.total_stall_s, 3)},
               {"peak outstanding (MiB)", fmt_mib(r.peak_outstanding_bytes, 3) + " of Q = " + fmt_mib(cfg.capacity_bytes, 3)}});
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
  using units::s_to_us;
  const model::Platform platform = model::load_platform_or_default(o.platform);
  const model::KernelSource src = model::kernel_source(o.kernel);
  if (model::kernel_kind(src.json, src.origin) != "burst_gap")
    throw InputError("--kernel: " + src.origin + " describes a MoE layer (kind \"moe\"): xstage plan moe --kernel "
                     "simulates it; simulate --kernel takes kind \"burst_gap\"");
  const model::BurstGapKernel k = model::burst_gap_kernel_from_json(src.json, src.origin, sim::kMaxScheduleSteps);
  const int producers = k.producers > 0 ? k.producers : platform_max_producers(platform);
  sim::check_burst_gap_work(k, producers, src.origin);
  const double steps = sim::burst_gap_schedule_steps(k, producers);
  check_trace_work(o, steps, "simulate --trace: " + std::to_string(producers) + " producers x " +
                                 std::to_string(k.tiles_per_producer()) + " tiles in " + src.origin);
  sim::SimResult timeline;
  const sim::BurstGapOutcome r = sim::simulate_burst_gap_kernel(platform, k, producers, o.trace.empty() ? nullptr : &timeline);
  const bool roles = k.issue == "epilogue_issuer";
  nlohmann::json run = {{"kernel", model::to_json(k)},
                        {"producers", producers},
                        {"drain_rate_gbps", units::bytes_per_s_to_gbps(r.drain_rate_bytes_per_s)},
                        {"capacity_bytes", r.capacity_bytes}};
  if (!o.trace.empty()) {
    std::vector<sim::TraceTrack> tracks;
    for (int role = 0; role < (roles ? 2 : 1); ++role)
      for (int c = 0; c < producers; ++c)
        tracks.push_back({0, k.name, role * producers + c,
                          "CTA " + std::to_string(c) + (roles ? (role ? " epilogue issuer" : " producer") : "")});
    nlohmann::json meta = run;
    stamp_json(meta, "xstage.simulate.kernel/1", o.platform, platform);
    write_file_atomically(o.trace, sim::chrome_trace(timeline, tracks, meta).dump() + "\n", o.force,
                          {o.platform, o.kernel}, "--trace");
  }
  // Per tile kind: the as-built verdict (what the producer loses per tile) in the words of `plan`.
  const std::string cover = roles ? "the cover window (the mainloops the producer runs ahead)"
                            : k.issue == "piggyback" ? "the next tile's mainloop (chunks at its k-steps)"
                                                     : "the next mainloop";
  std::vector<plan::ActOn> acts;
  for (const auto& kind : r.kinds)
    acts.push_back(plan::act_on(kind.as_built, kind.name + " tile", cover));
  const double over = r.free_makespan_s > 0 ? r.makespan_s / r.free_makespan_s - 1.0 : 0.0;
  if (o.json) {
    nlohmann::json j = run;
    j.update({{"issue", k.issue},
              {"makespan_us", s_to_us(r.makespan_s)},
              {"no_backpressure_makespan_us", s_to_us(r.free_makespan_s)},
              {"steady_stall_per_period_us", s_to_us(r.steady_stall_per_period_s)},
              {"total_stall_us", s_to_us(r.total_stall_s)},
              {"peak_outstanding_bytes", r.peak_outstanding_bytes},
              {"tile_kinds", nlohmann::json::array()}});
    for (std::size_t i = 0; i < r.kinds.size(); ++i) {
      const auto& kind = r.kinds[i];
      nlohmann::json kj = {{"name", kind.name},
                           {"tiles", kind.tiles},
                           {"burst_bytes", kind.burst_bytes},
                           {"median_stall_us", s_to_us(kind.median_stall_s)},
                           {"max_stall_us", s_to_us(kind.max_stall_s)}};
      if (roles) {
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
                         {"text", plan::verdict_text(kind.aligned)}};
        kj["as_built"] = plan::as_built_json(kind.as_built);
        kj["act_on"] = plan::to_json(acts[i]);
      }
      j["tile_kinds"].push_back(kj);
    }
    stamp_json(j, "xstage.simulate.kernel/1", o.platform, platform);
    print_json(j);
    return;
  }
  out_stream() << "kernel " << k.name << (k.description.empty() ? "" : ": " + k.description) << "\n";
  for (const auto& a : k.assumptions) out_stream() << "  assumes: " << a << "\n";
  out_stream() << "simulated on " << platform_label(o.platform, platform) << ": K = " << producers << " producers x "
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
  using units::s_to_us;
  if (!o.kernel.empty()) return run_kernel(o);
  if (!o.schedule.empty()) return run_schedule_file(o);
  if (o.producers <= 0 || o.bytes_per_producer <= 0)
    throw InputError("--producers and --bytes-per-producer are required without --schedule");
  require_work_within("simulate: --producers " + std::to_string(o.producers) + " x --bursts " + std::to_string(o.bursts),
                      static_cast<double>(o.producers) * o.bursts, kMaxProducerBursts, "producer-bursts",
                      kBytesPerProducerBurst);
  check_trace_work(o, 3.0 * o.producers * o.bursts,
                   "simulate --trace: --producers " + std::to_string(o.producers) + " x --bursts " +
                       std::to_string(o.bursts) + " x 3 spans (burst, gap, completion wait)");
  const model::Platform platform = model::load_platform_or_default(o.platform);
  const model::BurstGapInput in =
      burst_gap_input(o.producers, o.bytes_per_producer, o.gap_us, o.t_iss0_us, o.capacity_bytes);
  const model::BurstGapAudit model_pred = model::audit_burst_gap(platform, in);

  sim::SimConfig cfg;
  cfg.drain_rate_bytes_per_s = model_pred.drain_rate_bytes_per_s;  // R(K)
  cfg.capacity_bytes = model_pred.capacity_bytes;
  cfg.drain_ramp_s = platform.knee_ramp_s;
  cfg.completion_coupled = o.completion_coupled;
  cfg.completion_latency_s = units::us_to_s(o.latency_us);
  cfg.time_limit_s = 1e3;
  cfg.record_timeline = !o.trace.empty();
  const auto schedules = sim::periodic_schedules(o.producers, o.bytes_per_producer, model_pred.t_iss0_s, in.gap_s, o.bursts);
  const sim::SimResult r = sim::simulate(cfg, schedules);
  const sim::SteadyState ss = sim::producer_steady_state(r, o.producers);
  write_trace(o, r, platform,
              {{"producers", o.producers}, {"bytes_per_producer", o.bytes_per_producer}, {"gap_us", o.gap_us},
               {"bursts_per_producer", o.bursts}, {"completion_coupled", o.completion_coupled},
               {"t_iss0_us", s_to_us(model_pred.t_iss0_s)},
               {"drain_rate_gbps", units::bytes_per_s_to_gbps(cfg.drain_rate_bytes_per_s)},
               {"capacity_bytes", cfg.capacity_bytes}});

  const std::vector<sim::AggregateBurst> agg = sim::aggregate_by_index(r, o.producers);
  std::vector<double> start, end;
  for (const auto& b : agg) {
    start.push_back(b.start_s);
    end.push_back(b.issue_end_s);
  }
  const double model_t_iss = model_pred.t_iss_s;
  const double model_period = o.completion_coupled ? model_pred.completion_coupled_period_s : model_pred.period_s;
  if (o.json) {
    nlohmann::json j = {{"producers", o.producers},
                        {"bytes_per_producer", o.bytes_per_producer},
                        {"gap_us", o.gap_us},
                        {"completion_coupled", o.completion_coupled},
                        {"t_iss0_us", s_to_us(model_pred.t_iss0_s)},
                        {"drain_rate_gbps", units::bytes_per_s_to_gbps(cfg.drain_rate_bytes_per_s)},
                        {"capacity_bytes", cfg.capacity_bytes},
                        {"steady_t_iss_us", s_to_us(ss.issue_time_s)},
                        {"steady_period_us", s_to_us(ss.period_s)},
                        {"model_t_iss_us", s_to_us(model_t_iss)},
                        {"model_period_us", s_to_us(model_period)},
                        {"peak_outstanding_bytes", r.peak_outstanding_bytes},
                        {"makespan_us", s_to_us(r.makespan_s)},
                        {"bursts_per_producer", o.bursts}};
    stamp_json(j, "xstage.simulate/1", o.platform, platform);
    if (o.per_burst) j["bursts"] = nlohmann::json::array();
    for (int i = 0; o.per_burst && i < o.bursts; ++i) {
      nlohmann::json b = {{"index", i},
                          {"start_us", s_to_us(start[i])},
                          {"t_iss_us", s_to_us(end[i] - start[i])},
                          {"stall_us", s_to_us(end[i] - start[i] - model_pred.t_iss0_s)}};
      if (i + 1 < o.bursts) b["period_us"] = s_to_us(start[i + 1] - start[i]);
      j["bursts"].push_back(b);
    }
    print_json(j);
    return;
  }
  out_stream() << "simulated " << o.bursts << " bursts of " << o.producers << " x " << fmt_num(o.bytes_per_producer, 0)
            << " B, gap " << fmt_num(o.gap_us, 3) << " us on " << platform_label(o.platform, platform)
            << (o.completion_coupled ? " (completion-coupled)" : "") << "\n";
  print_table({"", "simulated", "model"},
              {{"steady T_iss (us)", fmt_us(ss.issue_time_s, 3), fmt_us(model_t_iss, 3)},
               {"steady period (us)", fmt_us(ss.period_s, 3), fmt_us(model_period, 3)},
               {"peak outstanding (MiB)", fmt_mib(r.peak_outstanding_bytes, 3), fmt_mib(cfg.capacity_bytes, 3) + " (Q)"}});
  if (!o.per_burst) return;
  std::vector<std::vector<std::string>> rows;
  for (int i = 0; i < o.bursts; ++i)
    rows.push_back({std::to_string(i), fmt_us(start[i], 3), fmt_us(end[i] - start[i], 3),
                    i + 1 < o.bursts ? fmt_us(start[i + 1] - start[i], 3) : "", fmt_us(end[i] - start[i] - model_pred.t_iss0_s, 3)});
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
      ->check(kNonNegative)->excludes(kernel);
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
