// The audits behind `xstage plan` (plan_audits.hpp).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "cli_common.hpp"
#include "plan_audits.hpp"
#include "xstage/model/audit.hpp"
#include "xstage/model/burst_gap.hpp"
#include "xstage/model/error.hpp"
#include "xstage/model/kernel_description.hpp"
#include "xstage/model/units.hpp"
#include "xstage/model/work_limit.hpp"
#include "xstage/model/workloads.hpp"
#include "xstage/moe/moe_fused_layout.hpp"
#include "xstage/planner/moe_plan.hpp"
#include "xstage/sim/design_check.hpp"
#include "xstage/sim/moe_order_simulation.hpp"
#include "xstage/sim/simulator.hpp"
#include "xstage/sim/trace_events.hpp"

namespace xstage::cli::plan {

void left_align(std::vector<std::string>& header, std::vector<std::vector<std::string>>& rows,
                std::initializer_list<std::size_t> columns) {
  for (std::size_t c : columns) {
    std::size_t w = header[c].size();
    for (const auto& r : rows) w = std::max(w, r[c].size());
    header[c].resize(w, ' ');
    for (auto& r : rows) r[c].resize(w, ' ');
  }
}

namespace {

void print_legend(const std::vector<LegendLine>& legend) {
  for (const auto& l : legend) out_stream() << "  " << l.column << ": " << l.models << "\n";
}

void print_attention(const model::AttentionAudit& a, const model::AttentionInput& in,
                     const std::vector<sim::RecurringBurstCheck>& built_per_point) {
  out_stream() << "FlashAttention epilogue A2A: K = " << in.producers << ", output tile " << in.block_m << "x" << in.head_dim
            << " (" << fmt_num(a.bytes_per_producer / 1024, 1) << " KiB/producer), V = " << fmt_mib(a.burst.volume_bytes, 2)
            << " MiB, T_iss0 = " << fmt_us(a.burst.t_iss0_s, 3) << " us (" << model::to_string(a.burst.t_iss0_source)
            << "), R(K=" << in.producers << ") = " << fmt_num(units::bytes_per_s_to_gbps(a.burst.drain_rate_bytes_per_s), 1)
            << " GB/s, sigma = " << fmt_us(in.sigma_s, 3) << " us/KV tile\n";
  out_stream() << "G* = " << fmt_us(a.recovery_gap_s, 2) << " us, q_peak0 = " << fmt_mib(a.burst.q_peak0_bytes, 2)
            << " MiB vs Q = " << fmt_mib(a.burst.capacity_bytes, 2) << " MiB ("
            << (a.burst.verdict.capacity_bound_ok ? "capacity bound holds" : "capacity bound violated: isolated T_iss " +
                                                                               fmt_us(a.burst.isolated_t_iss_s, 2) + " us")
            << "), M_ub* = " << a.sufficient_seq_len_tokens << " tokens (eq. 20)\n";
  std::vector<std::vector<std::string>> rows;
  for (std::size_t i = 0; i < a.points.size(); ++i) {
    const model::AttentionPoint& p = a.points[i];
    const sim::RecurringBurstCheck& built = built_per_point[i];
    rows.push_back({std::to_string(p.seq_len), fmt_us(p.qloop_gap_s, 1), fmt_us(p.issue_backpressure_s, 2),
                    fmt_us(p.critical_stall_s, 2), std::to_string(p.output_bursts), fmt_us(p.completion_coupled_exposed_s, 1),
                    verdict_text(p.verdict), stall_pair(built), attention_act_on(built).text});
  }
  std::vector<std::string> header = {"M", "G_Qloop us", "dt (18) us", "dt' (19) us", "N_t", "E_cc (17) us",
                                     kAttentionLegend[0].column, kAttentionLegend[1].column, kAttentionLegend[2].column};
  left_align(header, rows, {6, 8});
  print_table(header, rows);
  print_legend(kAttentionLegend);
}

std::vector<std::string> moe_row(const std::string& name, const model::MoeInput& in, const model::MoeAudit& a) {
  return {name,
          fmt_mib(a.volume_bytes, 2),
          fmt_us(in.t_l1_mma_s, 2) + "/" + fmt_us(in.t_l2_mma_s, 2),
          fmt_num(in.n1, 0) + "/" + fmt_num(in.n2, 0),
          fmt_us(a.wave_issue_overhead_s, 2),
          fmt_us(a.interleaved_issue_overhead_s, 2),
          fmt_us(a.wave_tile_stall_s, 2) + "/" + fmt_us(a.interleaved_tile_stall_s, 2),
          a.interleaving_sufficient ? "yes" : "no",
          std::to_string(a.lead_knee_rows),
          verdict_text(a.wave_verdict) + " -> " + verdict_text(a.interleaved_verdict)};
}
// `plan moe`'s one row: the closed form of the aligned burst (eq. 10-16); its legend names the burst.
const std::vector<std::string> kMoeHeader = {"shape", "V MiB", "T_L1/T_L2 us", "n1/n2", "dT wave us", "dT int us",
                                             "stall w/i us", "eq.14", "D_knee", "aligned w -> i (eq. 10)"};


}  // namespace

void run_attn(const PlanCommon& c, const AttnOptions& options) {
  AttnOptions o = options;
  o.platform = c.platform;
  o.producers = c.producers;
  const planner::PlanAttnResult r = planner::plan_attn(o, true);
  if (c.json) {
    print_json(r.json);
    return;
  }
  out_stream() << "platform " << platform_label(c.platform, r.platform) << "\n";
  print_attention(r.audit, r.input, r.as_built);
}

namespace {

// The options only the CLI has, --trace and --force: after the request's checks (planner::check_plan_moe, whose
// options come first on the command line), refused (exit 2) where they have no effect.
void check_trace_flags(const MoeOptions& o) {
  auto refuse = [](const std::string& flag, const std::string& why) { throw InputError(flag + ": " + why); };
  if (!o.request.simulate) {
    const std::pair<const char*, bool> sim_only[] = {{"--trace", !o.trace.empty()}, {"--force", o.force}};
    for (const auto& [flag, set] : sim_only)
      if (set) refuse(flag, "has no effect without --simulate (it describes the simulated launch)");
  }
  if (o.force && o.trace.empty()) refuse("--force", "has no effect without --trace (no file is written)");
}

// `plan moe --simulate --trace FILE`: both orders' simulated timelines in one Chrome trace, the expert-wave
// order as process 0 and the interleaved one as process 1, one thread per CTA (per role with an epilogue issuer).
// Work limit of the trace document: about kBytesPerMoeTraceSpan per timeline span (the JSON document and its
// text, measured: 3.3 GiB at 1.6 million spans), checked before the document is built; the simulation itself is
// within plan moe --simulate's limit.
constexpr double kMaxMoeTraceSpans = 1 << 20;
constexpr double kBytesPerMoeTraceSpan = 2100;

void write_moe_trace(const MoeOptions& o, const model::MoeKernel& k, const nlohmann::json& simulated,
                     const sim::MoeOrderTimelines& t, const std::vector<std::string>& inputs) {
  // Each span and each sample of the path-occupancy counter becomes a trace event.
  const double spans = static_cast<double>(t.wave.timeline.size() + t.interleaved.timeline.size() +
                                           t.wave.occupancy.size() + t.interleaved.occupancy.size());
  require_work_within("plan moe --simulate --trace: both orders' timelines", spans, kMaxMoeTraceSpans,
                      "timeline spans and counter samples", kBytesPerMoeTraceSpan);
  const bool roles = k.combine == "epilogue_issuer";
  nlohmann::json trace;
  int pid = 0;
  for (const auto& [name, r] : {std::pair<const char*, const sim::SimResult*>{"wave", &t.wave}, {"interleaved", &t.interleaved}}) {
    std::vector<sim::TraceTrack> tracks;
    const std::string process = std::string(name) + " order (" + k.name + ", rank 0)";
    for (int role = 0; role < (roles ? 2 : 1); ++role)
      for (int c = 0; c < t.producers; ++c)
        tracks.push_back({pid, process, role * t.producers + c,
                          "CTA " + std::to_string(c) + (roles ? (role ? " epilogue issuer" : " producer") : "")});
    nlohmann::json one = sim::chrome_trace(*r, tracks);
    if (trace.is_null()) trace = std::move(one);
    else for (auto& e : one["traceEvents"]) trace["traceEvents"].push_back(std::move(e));
    ++pid;
  }
  trace["otherData"] = {{"kernel", model::to_json(k)}, {"simulated", simulated}};
  trace["otherData"]["simulated"].erase("rows");
  write_file_atomically(o.trace, trace.dump() + "\n", o.force, inputs, "--trace");
}

}  // namespace

void run_moe(const PlanCommon& c, const MoeOptions& o) {
  planner::PlanMoeRequest request = o.request;
  request.platform = c.platform;
  request.producers = c.producers;
  planner::check_plan_moe(request, true);
  check_trace_flags(o);
  planner::PlanMoeResult r = planner::plan_moe_inputs(request, true);
  const model::Platform& platform = r.platform;
  const std::optional<model::MoeKernel>& kernel = r.kernel;
  // The files this command reads: --trace may replace none of them, --force or not.
  std::vector<std::string> inputs = {c.platform, request.kernel_name()};
  if (kernel && kernel->routing != "balanced" && kernel->routing != "skewed") inputs.push_back(kernel->routing);
  if (!o.trace.empty()) check_output_path("--trace", o.trace, o.force, inputs);
  sim::MoeOrderTimelines timelines;
  planner::plan_moe_audit(request, r, o.trace.empty() ? nullptr : &timelines);
  const model::MoeInput& in = r.input;
  const model::MoeAudit& a = r.audit;
  const MoeAsBuilt& built = r.as_built;
  const MoeVerdict& verdict = r.verdict;
  const nlohmann::json& simulated = r.simulated;
  const bool simulate = request.simulate;
  if (!o.trace.empty()) write_moe_trace(o, *kernel, simulated, timelines, inputs);
  if (c.json) {
    print_json(r.json);
    return;
  }
  out_stream() << "platform " << platform_label(c.platform, platform) << "\n";
  if (kernel) {
    const planner::MoePlanInput& pin = *r.described;
    // The description's texts are user data: escaped and bounded like every echo of it.
    out_stream() << "kernel " << shown_text(kernel->name, 200)
                 << (kernel->description.empty() ? "" : ": " + one_line(kernel->description, 1000)) << "\n"
                 << "  hidden " << kernel->hidden << ", h_inter " << kernel->h_inter << ", " << kernel->experts
                 << " experts, top-" << kernel->top_k << ", tiles " << kernel->block_m << "x" << kernel->block_n << "x"
                 << kernel->out_bytes << " B\n"
                 << "  T_L1 " << fmt_us(in.t_l1_mma_s, 2) << " us (" << one_line(pin.t_l1_source, 1000) << ")\n"
                 << "  T_L2 " << fmt_us(in.t_l2_mma_s, 2) << " us (" << one_line(pin.t_l2_source, 1000) << ")\n";
    for (const auto& x : kernel->assumptions) out_stream() << "  assumes: " << one_line(x, 1000) << "\n";
  }
  print_table(kMoeHeader, {moe_row(kernel ? kernel->name : "custom", in, a)});
  out_stream() << "  stall w/i us: eq. 15's per-tile MMA stall [T_RS - T_cover]+ of that aligned burst, T_RS = T_iss0 + dT + "
                  "staging, T_cover = T_L2 (wave) or T_L1 (interleaved); closed form\n";
  out_stream() << "  " << kMoeLegend[0].column << ": " << kMoeLegend[0].models
               << (simulate ? "" : "; --simulate runs both orders as built") << "\n";
  out_stream() << "\nas built (" << built.combine << " Combine, " << built.ranks << (built.ranks == 1 ? " rank, " : " ranks, ")
               << built.chunks() << (built.chunks() == 1 ? " burst" : " bursts") << " per Linear-2 tile), stall w | i us (first/steady): "
               << verdict.stalls << "\nact on: " << verdict.act.text << "\n";
  if (simulate) {
    out_stream() << "\nsimulated, " << simulated["routing"].get<std::string>() << " routing, " << simulated["tokens_per_rank"].get<long long>()
                 << " tokens/rank over " << kernel->ranks << " ranks, K = " << simulated["producers"].get<int>()
                 << ", D = " << simulated["lead_rows"].get<int>() << ", Combine " << kernel->combine
                 << (kernel->combine == "epilogue_issuer" ? " (" + std::to_string(kernel->cover_slots) + " slots)" : "")
                 << ", staging " << fmt_num(kernel->staging_us, 2) << " us"
                 << (r.datasheet_rate ? ", mainloops at the datasheet rate" : "")
                 << "\n";
    const bool roles = simulated["wave"].contains("median_tile_span_us");
    std::vector<std::vector<std::string>> rows;
    for (const char* name : {"wave", "interleaved"}) {
      const auto& r = simulated[name];
      rows.push_back({name, fmt_num(r["makespan_us"].get<double>(), 1), fmt_num(r["total_stall_us"].get<double>(), 1),
                      fmt_num(r["median_tile_stall_us"].get<double>(), 2), fmt_num(r["max_tile_stall_us"].get<double>(), 2),
                      fmt_num(r["dependency_wait_us"].get<double>(), 1)});
      if (roles)
        for (const char* key : {"median_tile_span_us", "median_mma_stall_us"})
          rows.back().push_back(fmt_num(r[key].get<double>(), 2));
    }
    std::vector<std::string> header = {"order", "makespan us", "total stall us", "median burst stall us",
                                       "max burst stall us", "L1->L2 wait us"};
    if (roles) {
      header.push_back("median T_RS us");
      header.push_back("median MMA stall us");
    }
    print_table(header, rows);
    out_stream() << "predicted speedup interleaved/wave " << fmt_num(simulated["predicted_speedup"].get<double>(), 3)
                 << ": choose " << simulated["choice"].get<std::string>() << "\n";
    if (roles)
      out_stream() << "T_RS: a Linear-2 tile's store span on its epilogue issuer (staging + issue, with backpressure); "
                      "MMA stall: the producer's wait for a free slot at a Linear-2 tile's entry (eq. 15).\n";
    if (!o.trace.empty()) out_stream() << "trace: " << o.trace << " (Perfetto / chrome://tracing)\n";
  }
}

// `xstage plan` with no kernel: every built-in workload on the platform. Each row ends in what to act on
// (the as-built verdict in words), beside the aligned worst case (eq. 10) as context.
void run_default(const PlanCommon& c) {
  const planner::PlanResult r = planner::plan({c.platform, c.producers}, true);
  if (c.json) {
    print_json(r.json);
    return;
  }
  const model::Platform& platform = r.platform;
  const int k = r.producers;
  out_stream() << "xstage plan: design test of built-in workloads on platform " << platform_label(c.platform, platform)
               << " (K = " << k << ", R(K=" << k << ") = " << fmt_num(r.drain_rate_gbps, 1) << " GB/s";
  out_stream() << ")\n";
  if (!platform.description.empty()) out_stream() << "  " << platform.description << "\n";
  const model::Lookup t0 = platform.issue_floor_s(k, 32768);
  out_stream() << "  " << platform.issue_floor.size() << " measured issue floors; T_iss0(K=" << k
               << ", B=32 KiB) = " << fmt_us(t0.value, 3) << " us (" << model::to_string(t0.source) << ")\n";
  for (const auto& q : platform.capacity)
    out_stream() << "  Q(K=" << q.producers << ") = " << fmt_mib(q.bytes, 3) << " MiB"
                 << (q.isolated_drain_rate_bytes_per_s > 0.0
                         ? " (smooth knee, R_iso = " + fmt_num(units::bytes_per_s_to_gbps(q.isolated_drain_rate_bytes_per_s), 1) + " GB/s)"
                         : std::string())
                 << "\n";
  if (!platform.drain_rate_by_producers.empty()) {
    out_stream() << "  R(K) =";
    for (const auto& d : platform.drain_rate_by_producers)
      out_stream() << " " << fmt_num(units::bytes_per_s_to_gbps(d.bytes_per_s), 1) << " (K=" << d.producers << ")";
    out_stream() << " GB/s\n";
  }
  if (platform.bounds.link_rate_bytes_per_s > 0.0)
    out_stream() << "  fitted under physical bounds: link " << fmt_num(units::bytes_per_s_to_gbps(platform.bounds.link_rate_bytes_per_s), 1)
                 << " GB/s per direction (" << one_line(platform.bounds.link_source, 200) << "); no rate above it\n";
  out_stream() << "  verdicts: keep = leave the bursts where they are, the next mainloop covers the drain; reshape = "
                  "the stores stall, change the order, the tile or the gap\n";
  out_stream() << "\nDiT attention, post-attention All-to-All from the FlashAttention epilogue (bf16, 128x128 tiles, sigma = "
               << fmt_num(units::s_to_us(model::kPaperSigmaS), 2) << " us/KV tile)\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& w : r.attention) {
    const model::AttentionAudit& a = w.audit;
    const auto& p = a.points.front();
    rows.push_back({w.name, std::to_string(w.seq_len), std::to_string(w.heads_per_gpu), fmt_us(a.recovery_gap_s, 2),
                    fmt_mib(a.burst.q_peak0_bytes, 2), std::to_string(a.sufficient_seq_len_tokens),
                    fmt_us(p.issue_backpressure_s, 2), fmt_us(p.completion_coupled_exposed_s, 1), verdict_text(p.verdict),
                    stall_pair(w.as_built), w.act.text});
  }
  std::vector<std::string> header = {"workload", "M", "heads/GPU", "G* us", "q_peak0 MiB", "M_ub*", "dt(M) us",
                                     "E_cc us", kAttentionLegend[0].column, kAttentionLegend[1].column,
                                     kAttentionLegend[2].column};
  left_align(header, rows, {8, 10});
  print_table(header, rows);
  print_legend(kAttentionLegend);

  out_stream() << "\nMoE Combine bursts, expert-wave vs interleaved (b_m = b_n = " << model::MoeKernel{}.block_n
               << ", bf16 Combine, " << kPlanRanks << " ranks; mainloops estimated at "
               << fmt_num(r.rate_bf16.flop_per_s_per_sm / 1e12, 2) << " TFLOP/s per SM bf16 (" << r.rate_bf16.source << "), "
               << fmt_num(r.rate_fp8.flop_per_s_per_sm / 1e12, 2) << " FP8 (" << r.rate_fp8.source << "))\n";
  rows.clear();
  for (const auto& m : r.moe) {
    const model::MoeInput& in = m.input;
    const model::MoeAudit& a = m.audit;
    rows.push_back({m.name, fmt_mib(a.volume_bytes, 2),
                    fmt_us(in.t_l1_mma_s, 2) + "/" + fmt_us(in.t_l2_mma_s, 2), fmt_num(in.n1, 0) + "/" + fmt_num(in.n2, 0),
                    fmt_us(a.wave_issue_overhead_s, 2) + "/" + fmt_us(a.interleaved_issue_overhead_s, 2),
                    a.interleaving_sufficient ? "yes" : "no", std::to_string(a.lead_knee_rows),
                    verdict_text(a.wave_verdict) + " -> " + verdict_text(a.interleaved_verdict),
                    m.verdict.stalls, m.verdict.act.text});
  }
  header = {"shape", "V MiB", "T_L1/T_L2 us", "n1/n2", "dT w/i us", "eq.14", "D_knee",
            kMoeLegend[0].column, kMoeLegend[1].column, kMoeLegend[2].column};
  left_align(header, rows, {7, 9});
  print_table(header, rows);
  print_legend(kMoeLegend);
  out_stream() << "\nG*: recovery gap (eq. 5). M_ub*: sequence length from which the Q-loop alone hides the burst (eq. 20).\n"
                  "E_cc: exposed time if the issuer waited for remote completion (eq. 17). dT w/i: issue overhead of the\n"
                  "aligned burst, wave / interleaved (eq. 4, 13). Mainloops at the platform's per-SM GEMM rates\n"
                  "(measured: the traced kernels; docs/platform.md). Details: xstage plan attn|moe --help.\n";
}

}  // namespace xstage::cli::plan
