#include "xstage/planner/paper_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <sstream>

#include "xstage/model/audit.hpp"
#include "xstage/model/burst_gap.hpp"
#include "xstage/model/error.hpp"
#include "xstage/model/kernel_description.hpp"
#include "xstage/model/units.hpp"
#include "xstage/model/workloads.hpp"
#include "xstage/planner/moe_plan.hpp"

namespace xstage::planner {

using nlohmann::json;

namespace {

void require_finite_nonneg(double x, const char* what) {
  if (!std::isfinite(x) || x < 0) throw InputError(std::string(what) + ": must be finite and >= 0, got " + std::to_string(x));
}
void require_pos(double x, const char* what) {
  if (!std::isfinite(x) || x <= 0) throw InputError(std::string(what) + ": must be finite and > 0, got " + std::to_string(x));
}

std::string num(double x, int decimals = 2) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, x);
  return buf;
}

// The paper's platform constants that are published outside the platform file (§3.5, §4.3).
constexpr int kPaperProducers = 148;     // one producer per SM, 148 SMs (§5.1)
constexpr int kPaperRanks = 8;           // EP = 8, Ulysses over 8 GPUs (§5.1)
constexpr double kPaperKneeBytesPerProducer = 33.0 * 1024;  // §3.5 "about 33 KB per producer"
constexpr double kPaperQloopGap8kS = 80e-6;                  // §4.3 "measured Q-loop gap is about 80 µs"

int largest_measured_producers(const model::Platform& p) {
  int k = 0;
  for (const auto& f : p.issue_floor) k = std::max(k, f.producers);
  return k > 0 ? k : kPaperProducers;
}

PaperRow row(std::string id, std::string source, std::string quantity, std::string unit, double published,
             std::optional<double> predicted, GoalKind goal, double tol, std::string inputs) {
  PaperRow r;
  r.id = std::move(id);
  r.source = std::move(source);
  r.quantity = std::move(quantity);
  r.unit = std::move(unit);
  r.published = published;
  r.predicted = predicted;
  r.goal = goal;
  r.tolerance = tol;
  r.inputs = std::move(inputs);
  return r;
}

json sens(const std::string& input, double value, double predicted) {
  return {{"input", input}, {"value", value}, {"predicted", predicted}};
}

// ---- §3 / §4.3 closed-form audit -----------------------------------------------------------------
model::AttentionInput paper_attention_input(const model::Platform& platform, const PaperOptions& o) {
  model::AttentionInput in;
  in.producers = largest_measured_producers(platform);
  in.block_m = 128;
  in.head_dim = 128;
  in.output_bytes_per_element = 2;
  in.block_n = 128;
  in.sigma_s = model::kPaperSigmaS;
  in.completion_latency_s = units::us_to_s(o.completion_latency_us);
  in.seq_lens = {8192, 65536};
  in.heads_per_gpu = o.heads_per_gpu;
  return in;
}

void knee_rows(const model::Platform& platform, const PaperOptions& o, PaperReport& rep) {
  const model::AttentionInput in = paper_attention_input(platform, o);
  const model::AttentionAudit a = model::audit_attention(platform, in);
  const double r = a.burst.drain_rate_bytes_per_s, t0 = a.burst.t_iss0_s;
  const std::string plat = "platform R, T_iss0(K, B), Q; K = " + std::to_string(in.producers) + ", B = 128x128 bf16";
  rep.rows.push_back(row("s4.3.fa_burst_volume", "§4.3", "aligned FA4 output burst V = K·b_m·d·s_out", "MiB", 4.6,
                         units::bytes_to_mib(a.burst.volume_bytes), GoalKind::kRelative, 0.10, plat));
  rep.rows.push_back(row("s4.3.q_peak0", "§4.3 (eq. 6)", "q_peak0 = [V − R·T_iss0]_+ of the aligned burst", "MiB", 4.1,
                         units::bytes_to_mib(a.burst.q_peak0_bytes), GoalKind::kRelative, 0.10, plat));
  rep.rows.push_back(row("s4.3.g_star", "§4.3 (eq. 5)", "recovery gap G* = [V/R − T_iss0]_+", "us", 6.0,
                         units::s_to_us(a.recovery_gap_s), GoalKind::kRelative, 0.10, plat));
  rep.rows.push_back(row("s4.3.m_ub", "§4.3 (eq. 20)", "M_ub* = b_n·ceil(G*/σ), σ = 0.79 us", "K tokens", 1.0,
                         a.sufficient_seq_len_tokens / 1000.0, GoalKind::kRelative, 0.10, plat + ", σ (§4.3)"));
  // §3.5: the knee and Q. Q is derived from the knee in the paper and in the platform file, so these two rows
  // check the arithmetic (eq. 6 at the knee), not an independent measurement.
  const double knee_v = kPaperKneeBytesPerProducer * in.producers;
  rep.rows.push_back(row("s3.5.capacity_from_knee", "§3.5 (eq. 6 at the knee)", "Q = V_knee − R·T_iss0", "MiB", 4.25,
                         units::bytes_to_mib(model::capacity_from_knee_bytes(t0, knee_v, r)), GoalKind::kRelative, 0.10,
                         "knee 33 KB per producer (§3.5), R, T_iss0 (consistency: Q is derived from this knee)"));
  const auto q = platform.capacity_bytes(in.producers);
  const double v_knee = model::knee_volume_bytes(t0, r, q.value);
  rep.rows.push_back(row("s3.5.knee_aggregate", "§3.5", "isolated-burst knee, aggregate V_knee = Q + R·T_iss0", "MiB",
                         4.77, units::bytes_to_mib(v_knee), GoalKind::kRelative, 0.10,
                         "platform Q(148), R, T_iss0 (consistency: the platform's Q comes from this knee)"));
  rep.rows.push_back(row("s3.5.knee_per_producer", "§3.5", "isolated-burst knee per producer", "KiB", 33.0,
                         v_knee / in.producers / 1024.0, GoalKind::kRelative, 0.10,
                         "platform Q(148), R, T_iss0 (consistency)"));
  rep.rows.push_back(row("s4.3.qloop_over_g_star", "§4.3", "measured 8K Q-loop gap (80 us, published) over G*", "x", 13.0,
                         kPaperQloopGap8kS / a.recovery_gap_s, GoalKind::kRelative, 0.10,
                         "the published 80 us Q-loop gap, G* from the platform"));
  // Period law at the FA4 burst (§3.4): drain-limited below G*, T_iss0 + G above; the paper prints no number for
  // the paper's platform, so it appears as detail, not as a row.
  json law = json::array();
  for (double g_us : {0.0, 2.0, 4.0, 6.0, 8.0, 12.0}) {
    const double g = units::us_to_s(g_us);
    law.push_back({{"gap_us", g_us},
                   {"t_iss_us", units::s_to_us(model::issue_time_s(t0, a.burst.volume_bytes, r, g))},
                   {"period_us", units::s_to_us(model::period_s(t0, a.burst.volume_bytes, r, g))},
                   {"completion_coupled_period_us", units::s_to_us(model::completion_coupled_period_s(a.burst.volume_bytes, r, g))}});
  }
  rep.details["period_law_fa4_burst"] = law;
  rep.details["design_test_fa4_burst"] = {{"capacity_bound_ok", a.burst.verdict.capacity_bound_ok},
                                          {"capacity_mib", units::bytes_to_mib(a.burst.capacity_bytes)}};
}

// ---- §4.3 E_cc and §2.3 ceiling --------------------------------------------------------------------
void ecc_rows(const model::Platform& platform, const PaperOptions& o, PaperReport& rep) {
  const model::AttentionInput in = paper_attention_input(platform, o);
  const model::AttentionAudit a = model::audit_attention(platform, in);
  const double published[2] = {16.0, 120.0};
  for (int i = 0; i < 2; ++i) {
    const auto& p = a.points[i];
    PaperRow r = row("s4.3.e_cc." + std::to_string(p.seq_len / 1024) + "k", "§5.3 / Figure 11 (eq. 17)",
                     "completion-coupled exposure E_cc = N_t·[V/R + T_lat − T_cover]_+ at M = " + std::to_string(p.seq_len),
                     "us", published[i], units::s_to_us(p.completion_coupled_exposed_s), GoalKind::kRelative, 0.10,
                     "R, T_iss0-free V/R of the aligned burst, N_t = ceil(ceil(M/128)·heads/K) = " +
                         std::to_string(p.output_bursts) + ", T_cover = σ/2, T_lat = " + num(o.completion_latency_us) +
                         " us");
    // Sensitivity: T_lat, heads per GPU, T_cover.
    for (double lat_us : {0.0, 1.0, 2.0, 3.0}) {
      model::AttentionInput s = in;
      s.completion_latency_s = units::us_to_s(lat_us);
      s.seq_lens = {p.seq_len};
      r.sensitivity.push_back(sens("T_lat_us", lat_us, units::s_to_us(model::audit_attention(platform, s).points[0].completion_coupled_exposed_s)));
    }
    for (int h : {2, 3, 4, 5, 6}) {
      model::AttentionInput s = in;
      s.heads_per_gpu = h;
      s.seq_lens = {p.seq_len};
      r.sensitivity.push_back(sens("heads_per_gpu", h, units::s_to_us(model::audit_attention(platform, s).points[0].completion_coupled_exposed_s)));
    }
    {
      model::AttentionInput s = in;
      s.completion_cover_s = 0.0;
      s.seq_lens = {p.seq_len};
      r.sensitivity.push_back(sens("T_cover_us", 0.0, units::s_to_us(model::audit_attention(platform, s).points[0].completion_coupled_exposed_s)));
    }
    // The T_lat that would reproduce the published value at this N_t (shown, never used).
    const double needed_lat = published[i] / p.output_bursts -
                              units::s_to_us(model::drain_time_s(a.burst.volume_bytes, a.burst.drain_rate_bytes_per_s)) +
                              units::s_to_us(a.completion_cover_s);
    r.sensitivity.push_back({{"input", "T_lat_us reproducing the published value (not used)"}, {"value", needed_lat},
                             {"predicted", published[i]}});
    r.missing = "T_lat (a fixed completion latency, eq. 17) is not published, nor the heads per GPU behind N_t; with "
                "T_lat = 0 E_cc is a lower bound. A T_lat of " + num(needed_lat) +
                " us would reproduce this point (see sensitivity)";
    rep.rows.push_back(r);
  }
  PaperRow c = row("s2.3.cc_ceiling", "§2.3", "completion-coupled speedup ceiling over the serial stage sum", "x", 1.5,
                   std::nullopt, GoalKind::kRelative, 0.10,
                   "T_wave^cc ≈ max(T_L1, T_Act) + max(T_L2, T_Combine^cc) (planner::completion_coupled_wave_ceiling)");
  c.missing = "the per-stage times it is computed from are DeepSeek-V4's published MegaMoE timeline (DeepSeek-AI "
              "2026b), which the X-Stage paper does not reproduce; the formula is implemented, the row has no input";
  for (double comb : {0.5, 1.0, 1.5})
    c.sensitivity.push_back({{"input", "T_Combine^cc / T_L1 with T_L2 = T_L1, T_Act = 0 (illustrative, not the paper's)"},
                             {"value", comb}, {"predicted", completion_coupled_wave_ceiling(1, 0, 1, comb)}});
  rep.rows.push_back(c);
}

// ---- Table 2 ------------------------------------------------------------------------------------
struct Table2Published {
  const char* kernel;  // kernels/moe/paper/<kernel>.json
  const char* model;
  double span_wave, span_int, t_l2, t_l1, stall_pred_wave, stall_meas_wave, stall_meas_int;
};
constexpr Table2Published kTable2[] = {
    {"paper-dit-moe", "DiT-MoE", 9.93, 3.77, 5.30, 9.77, 4.63, 4.18, 0.04},
    {"paper-qwen3.5", "Qwen3.5", 9.17, 3.82, 4.24, 14.40, 4.94, 4.31, 0.04},
    {"paper-hy3", "Hy3", 9.68, 3.59, 6.09, 10.79, 3.60, 3.08, 0.05},
    {"paper-mimo-v2.5", "MiMo-V2.5", 9.22, 3.94, 7.77, 7.57, 1.45, 0.71, 0.05},
    {"paper-glm-5.2", "GLM-5.2", 9.53, 3.63, 7.99, 18.77, 1.54, 0.92, 0.04},
    {"paper-dsv4-flash", "DSv4-Flash", 9.48, 3.83, 8.01, 7.40, 1.47, 0.65, 0.05},
    {"paper-dsv4-pro", "DSv4-Pro", 7.88, 3.55, 9.54, 11.57, 0.00, 0.06, 0.04},
};

model::MoeKernel paper_kernel(const std::string& name, const json& overrides = json::object()) {
  model::KernelSource src = model::kernel_source(name);
  for (const auto& [k, v] : overrides.items()) src.json[k] = v;
  return model::moe_kernel_from_json(src.json, src.origin, src.base_dir);
}

json simulate(const model::Platform& platform, const model::MoeKernel& k) {
  const int producers = largest_measured_producers(platform);
  const MoePlanInput in = moe_plan_input(platform, k, producers);
  return simulate_moe_orders(platform, k, in, producers);
}

void table2_rows(const model::Platform& platform, PaperReport& rep) {
  json detail = json::array();
  for (const auto& t : kTable2) {
    const model::MoeKernel k = paper_kernel(t.kernel);
    const json s = simulate(platform, k);
    const double sw = s["wave"]["median_tile_span_us"], si = s["interleaved"]["median_tile_span_us"];
    const double mw = s["wave"]["median_mma_stall_us"], mi = s["interleaved"]["median_mma_stall_us"];
    const std::string base = std::string("table2.") + t.model;
    const std::string inputs = std::string(t.kernel) + " (Table 2's mainloops), platform, skewed Zipf s = " +
                               num(k.zipf_s) + ", " + std::to_string(k.tokens) + " tokens/rank, epilogue issuer, 2 slots";
    PaperRow rw = row(base + ".wave_span", "Table 2", std::string(t.model) + " wave median T_RS", "us", t.span_wave, sw,
                      GoalKind::kRelative, 0.15, inputs);
    PaperRow ri = row(base + ".int_span", "Table 2", std::string(t.model) + " interleaved median T_RS", "us", t.span_int, si,
                      GoalKind::kRelative, 0.15, inputs);
    PaperRow tw = row(base + ".wave_stall", "Table 2", std::string(t.model) + " wave median MMA stall (measured)", "us",
                      t.stall_meas_wave, mw, GoalKind::kAbsolute, 1.0, inputs);
    PaperRow ti = row(base + ".int_stall", "Table 2", std::string(t.model) + " interleaved median MMA stall (measured)",
                      "us", t.stall_meas_int, mi, GoalKind::kAbsolute, 1.0, inputs);
    // Eq. 15 on the published spans and mainloops: the paper's own prediction column.
    PaperRow e15 = row(base + ".eq15_from_published_span", "Table 2 (pred. column)",
                       std::string(t.model) + " eq. 15 [T_RS^wave − T_L2]_+ on the published span", "us", t.stall_pred_wave,
                       units::s_to_us(model::per_tile_stall_s(units::us_to_s(t.span_wave), units::us_to_s(t.t_l2))),
                       GoalKind::kAbsolute, 0.01, "published wave span and L2 mainloop");
    // Missing mechanisms, with the sensitivity to the input that moves the row.
    if (!ri.within_goal()) {
      for (double st : {0.5, 1.0, 1.5}) {
        const json s2 = simulate(platform, paper_kernel(t.kernel, {{"staging_us", st}}));
        ri.sensitivity.push_back(sens("staging_us", st, s2["interleaved"]["median_tile_span_us"].get<double>()));
      }
      ri.missing = "the fixed staging term of T_RS (eq. 15: 'T_iss0 plus fixed staging overhead') is not published "
                   "(descriptions carry staging_us 0), so the predicted floor is T_iss0 of the tile's remote 7/8 of 48 KiB "
                   "plus residual backpressure only";
    }
    if (!rw.within_goal() || !tw.within_goal()) {
      std::string why;
      if (std::string(t.kernel) == "paper-dit-moe") {
        const json s2 = simulate(platform, paper_kernel(t.kernel, {{"hidden", k.h_inter}, {"h_inter", k.hidden}}));
        rw.sensitivity.push_back(sens("hidden/h_inter swapped (5632/1408)", 1, s2["wave"]["median_tile_span_us"].get<double>()));
        tw.sensitivity.push_back(sens("hidden/h_inter swapped (5632/1408)", 1, s2["wave"]["median_mma_stall_us"].get<double>()));
        why = "the layer's dimensions: the paper does not give DiT-MoE's shape and its mainloops fit hidden and h_inter "
              "swapped (description's assumptions); with 2 experts per rank the published shape makes short wave "
              "bursts. ";
      }
      if (mw < 0.5 && t.stall_meas_wave < 0.5 && !rw.within_goal())
        why += "the model predicts no wave backpressure (L2 mainloop + T_iss0 covers V/R) yet the paper measures a "
               "drain-limited span: a mechanism outside the fluid model (e.g. Combine bursts of several tiles per "
               "issuer, or a drain rate below the calibrated R under the MoE's many-destination traffic). ";
      for (double zs : {0.8, 1.6}) {
        const json s2 = simulate(platform, paper_kernel(t.kernel, {{"zipf_s", zs}}));
        rw.sensitivity.push_back(sens("zipf_s", zs, s2["wave"]["median_tile_span_us"].get<double>()));
        tw.sensitivity.push_back(sens("zipf_s", zs, s2["wave"]["median_mma_stall_us"].get<double>()));
      }
      why += "The skew of 'skewed routing' is not published (Zipf s = 1.2 assumed).";
      if (!rw.within_goal()) rw.missing = why;
      if (!tw.within_goal()) tw.missing = why;
    }
    for (PaperRow* r : {&rw, &ri, &tw, &ti, &e15}) rep.rows.push_back(*r);
    detail.push_back({{"model", t.model}, {"kernel", t.kernel}, {"simulated", s}});
  }
  rep.details["table2"] = detail;
}

// ---- the 84-configuration distribution ------------------------------------------------------------------
double geomean(const std::vector<double>& x) {
  double s = 0;
  for (double v : x) s += std::log(v);
  return x.empty() ? 0 : std::exp(s / x.size());
}
double median(std::vector<double> x) {
  if (x.empty()) return 0;
  std::sort(x.begin(), x.end());
  const size_t n = x.size();
  return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

void distribution_rows(const model::Platform& platform, const PaperOptions& o, PaperReport& rep) {
  json configs = json::array();
  std::vector<double> all, balanced, skewed;
  for (const auto& t : kTable2)
    for (const char* routing : {"balanced", "skewed"})
      for (long long tokens : o.distribution_tokens) {
        const json s = simulate(platform, paper_kernel(t.kernel, {{"routing", routing}, {"tokens", tokens}}));
        const double sp = s["predicted_speedup"];
        // W8A8 and W4A8 share the prediction: the mainloops (Table 2's, W8A8) are the only precision input, and
        // FP8 x FP4 MMAs run at the FP8 rate (assumption w4a8_same_mainloops).
        for (const char* precision : {"W8A8", "W4A8"}) {
          configs.push_back({{"model", t.model}, {"precision", precision}, {"routing", routing}, {"tokens_per_rank", tokens},
                             {"predicted_speedup", sp},
                             {"wave_makespan_us", s["wave"]["makespan_us"]},
                             {"interleaved_makespan_us", s["interleaved"]["makespan_us"]}});
          all.push_back(sp);
          (std::string(routing) == "skewed" ? skewed : balanced).push_back(sp);
        }
      }
  const std::string inputs = std::to_string(all.size()) + " configurations: 7 paper kernels x {W8A8, W4A8} x {balanced, "
                             "skewed} x " + std::to_string(o.distribution_tokens.size()) + " token counts; both orders simulated";
  const char* mech =
      "the simulator carries the X-Stage and the row dependencies only: no L2-cache locality of expert weights (the "
      "paper's cause of its 0.94x regressions), no W4A8 difference, and per-shape mainloops fixed across token counts; "
      "the token counts and the skew of the 84 configurations are not published";
  PaperRow g = row("moe84.geomean", "§5.2.1", "interleaved/wave speedup, geometric mean", "x", 1.18, geomean(all),
                   GoalKind::kAbsolute, 0.05, inputs);
  PaperRow m = row("moe84.median", "§5.2.1", "interleaved/wave speedup, median", "x", 1.17, median(all), GoalKind::kNone,
                   0.10, inputs);
  PaperRow mx = row("moe84.max", "§5.2.1", "interleaved/wave speedup, maximum", "x", 1.62,
                    all.empty() ? 0 : *std::max_element(all.begin(), all.end()), GoalKind::kAbsolute, 0.15, inputs);
  PaperRow mn = row("moe84.min", "§5.2.1", "interleaved/wave speedup, minimum (regressions)", "x", 0.94,
                    all.empty() ? 0 : *std::min_element(all.begin(), all.end()), GoalKind::kNone, 0.10, inputs);
  for (PaperRow* r : {&g, &m, &mx, &mn}) {
    if (!r->within_goal()) r->missing = mech;
    for (long long tk : o.distribution_tokens) {
      std::vector<double> sub;
      for (const auto& c : configs)
        if (c["tokens_per_rank"] == tk) sub.push_back(c["predicted_speedup"]);
      const double v = r == &g ? geomean(sub) : r == &m ? median(sub)
                       : r == &mx ? *std::max_element(sub.begin(), sub.end())
                                  : *std::min_element(sub.begin(), sub.end());
      r->sensitivity.push_back(sens("tokens_per_rank (this count only)", static_cast<double>(tk), v));
    }
    rep.rows.push_back(*r);
  }
  rep.details["moe84"] = {{"configurations", configs},
                          {"geomean_balanced", geomean(balanced)},
                          {"geomean_skewed", geomean(skewed)},
                          {"below_one", std::count_if(all.begin(), all.end(), [](double v) { return v < 1.0; })},
                          {"published_direction", "skewed routing benefits more than balanced"},
                          {"predicted_direction_holds", geomean(skewed) > geomean(balanced)}};
}

// ---- Table 3 ----------------------------------------------------------------------------------------------
struct Table3Column {
  long long m;
  double fa, serial, fused, hiding, speedup;
};
constexpr Table3Column kFa3[] = {{8192, 195.2, 295.6, 207.0, 0.88, 1.428},
                                 {16384, 785.5, 968.3, 795.5, 0.95, 1.217},
                                 {32768, 3236.7, 3579.6, 3241.5, 0.99, 1.104},
                                 {49152, 7275.6, 7767.9, 7285.7, 0.98, 1.066},
                                 {65536, 13249.4, 13936.6, 13218.3, 1.00, 1.054}};
constexpr Table3Column kFa4[] = {{8192, 85.4, 140.9, 99.4, 0.75, 1.417},
                                 {16384, 346.5, 462.4, 356.6, 0.91, 1.297},
                                 {32768, 1439.4, 1660.9, 1429.2, 1.00, 1.162},
                                 {49152, 3281.4, 3661.7, 3282.1, 1.00, 1.116},
                                 {65536, 5340.7, 5813.0, 5348.9, 0.98, 1.087}};

void table3_rows(const model::Platform& platform, const PaperOptions& o, PaperReport& rep) {
  json detail = json::array();
  const double share = static_cast<double>(kPaperRanks - 1) / kPaperRanks;
  for (int fa = 0; fa < 2; ++fa) {
    const char* name = fa == 0 ? "FA3" : "FA4";
    const auto& cols = fa == 0 ? kFa3 : kFa4;
    for (const auto& c : cols) {
      FusedAttentionInput in;
      in.fa_time_s = units::us_to_s(c.fa);
      in.seq_len = c.m;
      in.heads_per_gpu = o.heads_per_gpu;
      in.producers = largest_measured_producers(platform);
      const FusedAttentionTime f = fused_attention_time(platform, in);
      const double remote = static_cast<double>(c.m) * o.heads_per_gpu * in.head_dim * in.out_bytes * share;
      const double a2a = serial_a2a_time_s(remote, units::gbps_to_bytes_per_s(o.a2a_rate_gbps), units::us_to_s(o.a2a_fixed_us));
      const double serial = f.fa_s + a2a;
      const double sp = model::speedup(serial, f.fused_s), h = model::hiding_ratio(f.fused_s, f.fa_s, serial);
      const std::string mk = std::to_string(c.m / 1024) + "k";
      const std::string inputs = std::string(name) + "-only " + num(c.fa, 1) + " us (published), σ = " +
                                 num(units::s_to_us(f.sigma_s), 3) + " us from it, N_t = " + std::to_string(f.waves) +
                                 ", serial A2A " + num(o.a2a_fixed_us, 1) + " us + V_remote/" + num(o.a2a_rate_gbps, 1) +
                                 " GB/s, V_remote = " + num(units::bytes_to_mib(remote), 2) + " MiB";
      PaperRow rs = row(std::string("table3.") + name + ".speedup." + mk, "Table 3", std::string(name) + " speedup at M = " + std::to_string(c.m),
                        "x", c.speedup, sp, c.m == 8192 ? GoalKind::kRelative : GoalKind::kNone, 0.10, inputs);
      PaperRow rf = row(std::string("table3.") + name + ".fused." + mk, "Table 3", std::string(name) + " fused time at M = " + std::to_string(c.m),
                        "us", c.fused, units::s_to_us(f.fused_s), GoalKind::kNone, 0.10, inputs);
      PaperRow rh = row(std::string("table3.") + name + ".hiding." + mk, "Table 3", std::string(name) + " hiding ratio at M = " + std::to_string(c.m),
                        "", c.hiding, h, GoalKind::kNone, 0.10, inputs);
      PaperRow ra = row(std::string("table3.") + name + ".serial_increment." + mk, "Table 3 (Serial − FA-only)",
                        std::string(name) + " serial All-to-All increment at M = " + std::to_string(c.m), "us",
                        c.serial - c.fa, units::s_to_us(a2a), GoalKind::kNone, 0.10,
                        "serial A2A line (assumption a2a_line), V_remote");
      const double needed_rate = remote / units::us_to_s(c.serial - c.fa - o.a2a_fixed_us);
      const char* a2a_missing =
          "the serial All-to-All's time on the paper's platform is not published apart from Serial − FA-only itself "
          "(it differs between FA3 and FA4 for the same volume: composition, launch and cache effects); the default "
          "line is the H200 pair's NCCL All-to-All";
      for (PaperRow* r : {&rs, &rh, &ra}) {
        for (double mult : {0.5, 1.0, 2.0}) {
          const double a2 = serial_a2a_time_s(remote, units::gbps_to_bytes_per_s(o.a2a_rate_gbps * mult), units::us_to_s(o.a2a_fixed_us));
          const double v = r == &rs ? model::speedup(f.fa_s + a2, f.fused_s)
                           : r == &rh ? model::hiding_ratio(f.fused_s, f.fa_s, f.fa_s + a2)
                                      : units::s_to_us(a2);
          r->sensitivity.push_back(sens("a2a_rate_gbps", o.a2a_rate_gbps * mult, v));
        }
        if (needed_rate > 0)
          r->sensitivity.push_back({{"input", "a2a_rate_gbps reproducing the published increment (not used)"},
                                    {"value", units::bytes_per_s_to_gbps(needed_rate)}, {"predicted", r->published}});
        if (!r->within_goal()) r->missing = a2a_missing;
      }
      if (!rf.within_goal())
        rf.missing = "the fused kernel's own issue, launch and measurement floor beyond T_iss0 per wave (the paper: 3–12 us "
                     "of in-kernel issue, a ±2 % DVFS band)";
      for (PaperRow* r : {&rs, &rf, &rh, &ra}) rep.rows.push_back(*r);
      detail.push_back({{"fa", name}, {"seq_len", c.m}, {"sigma_us", units::s_to_us(f.sigma_s)}, {"waves", f.waves},
                        {"qloop_gap_us", units::s_to_us(f.qloop_gap_s)}, {"issue_us", units::s_to_us(f.issue_s)},
                        {"drain_us", units::s_to_us(f.drain_s)}, {"fused_us", units::s_to_us(f.fused_s)},
                        {"serial_us", units::s_to_us(serial)}, {"a2a_us", units::s_to_us(a2a)}, {"speedup", sp},
                        {"hiding_ratio", h}});
    }
  }
  rep.details["table3"] = detail;
}

void add_assumptions(const PaperOptions& o, PaperReport& rep) {
  auto add = [&](std::string id, std::string text, std::string source) {
    rep.assumptions.push_back({std::move(id), std::move(text), std::move(source)});
  };
  add("platform", "R = 717 GB/s, T_iss0 = 0.76 us at K = 148, B = 32 KiB, Q = 4.25 MiB (from the 33 KB knee); T_iss0 "
      "at other B scales in proportion to B (one measured point)", "paper §3.3–3.5; platforms/paper_8gpu_148sm.json");
  add("producers", "K = 148 aligned producers (one CTA per SM) for every burst", "paper §4.3, §5.1 (148 SMs)");
  add("sigma", "σ = 0.79 us per KV tile for the closed-form audit (§4.3 rows, E_cc)", "paper §4.3");
  add("heads_per_gpu", "Table 3's attention has " + std::to_string(o.heads_per_gpu) +
      " heads per GPU, batch 1, head dim 128, bf16 output (N_t and V_remote)",
      "not published; xstage's built-in paper-table3 workloads (src/model/workloads.cpp); 4 heads make FA4-only at "
      "64K 1.65 PFLOP/s, a plausible FA4 rate");
  add("t_cover", "T_cover = σ/2 (one QK^T mainloop) in eq. 17", "paper §4.3 ('T_cover ≲ T_QK^mma'); docs/model.md default");
  add("t_lat", "T_lat = " + num(o.completion_latency_us) + " us in eq. 17", "not published; 0 makes E_cc a lower bound");
  add("kernels", "the seven MegaMoE layers are kernels/moe/paper/*.json: published model dims, DeepGEMM 7f2a703 tiles "
      "(192x128, bf16 Combine), Table 2's full-tile mainloops, epilogue issuer with 2 staging slots, staging_us 0",
      "the description files' own assumptions lists");
  add("tokens", "Table 2: 55,808 tokens over 8 ranks = 6,976 per rank", "Table 2 caption; per-rank reading is an assumption");
  add("skew", "'skewed' routing is Zipf s = 1.2 over experts, independently per source rank", "not published; xstage default");
  add("distribution_tokens", "the 84 configurations = 7 models x {W8A8, W4A8} x {balanced, skewed} x 3 token counts; "
      "the 3 counts are taken as 1/4, 1/2 and 1 of Table 2's 6,976 per rank", "paper §5.2.1 names the factors but not the counts");
  add("w4a8_same_mainloops", "W4A8 layers run Table 2's W8A8 mainloops (FP8 x FP4 MMAs at the FP8 rate); the two "
      "precisions therefore predict the same speedup", "assumption; the paper publishes W8A8 mainloops only");
  add("a2a_line", "serial All-to-All = " + num(o.a2a_fixed_us, 1) + " us + V_remote / " + num(o.a2a_rate_gbps, 1) +
      " GB/s, V_remote = 7/8 of M·heads·128·2 B per GPU",
      "not published for the paper's platform; least squares over xstage's own 2 x H200 NCCL All-to-All "
      "(results/h200-x2/ulysses/ulysses.json, a2a-nccl at M = 8K..64K, 4 heads per GPU): another platform");
  add("fused_time", "fused sender-visible time = FA-only + N_t·(T_iss0 + Δt'(M)) with σ(M) = FA-only / (N_t·ceil(M/128))",
      "eq. 18–19 and the issue floor; the issue cost outside T_iss0 is not modelled");
}

}  // namespace

// ---- time models ---------------------------------------------------------------------------------------
double completion_coupled_wave_ceiling(double t_l1_s, double t_act_s, double t_l2_s, double t_combine_cc_s) {
  require_finite_nonneg(t_l1_s, "t_l1");
  require_finite_nonneg(t_act_s, "t_act");
  require_finite_nonneg(t_l2_s, "t_l2");
  require_finite_nonneg(t_combine_cc_s, "t_combine_cc");
  const double serial = t_l1_s + t_act_s + t_l2_s + t_combine_cc_s;
  if (serial <= 0) throw InputError("completion-coupled ceiling: every stage time is 0");
  return serial / (std::max(t_l1_s, t_act_s) + std::max(t_l2_s, t_combine_cc_s));
}

long long fa_output_waves(long long seq_len, int block_m, int heads_per_gpu, int batch, int producers) {
  require_pos(static_cast<double>(seq_len), "seq_len");
  require_pos(block_m, "block_m");
  require_pos(heads_per_gpu, "heads_per_gpu");
  require_pos(batch, "batch");
  require_pos(producers, "producers");
  const long long tiles = model::ceil_div(seq_len, block_m) * heads_per_gpu * batch;
  return model::ceil_div(tiles, producers);
}

double fa_sigma_from_time_s(double fa_time_s, long long seq_len, int block_m, int block_n, int heads_per_gpu, int batch,
                            int producers) {
  require_pos(fa_time_s, "fa_time");
  require_pos(block_n, "block_n");
  const long long waves = fa_output_waves(seq_len, block_m, heads_per_gpu, batch, producers);
  return fa_time_s / (static_cast<double>(waves) * static_cast<double>(model::kv_tiles(seq_len, block_n)));
}

double serial_a2a_time_s(double remote_bytes, double a2a_rate_bytes_per_s, double fixed_s) {
  require_finite_nonneg(remote_bytes, "remote_bytes");
  require_pos(a2a_rate_bytes_per_s, "a2a_rate");
  require_finite_nonneg(fixed_s, "a2a_fixed");
  return fixed_s + remote_bytes / a2a_rate_bytes_per_s;
}

FusedAttentionTime fused_attention_time(const model::Platform& platform, const FusedAttentionInput& in) {
  require_pos(in.head_dim, "head_dim");
  require_pos(in.out_bytes, "out_bytes");
  FusedAttentionTime t;
  t.fa_s = in.fa_time_s;
  t.sigma_s = fa_sigma_from_time_s(in.fa_time_s, in.seq_len, in.block_m, in.block_n, in.heads_per_gpu, in.batch, in.producers);
  t.waves = fa_output_waves(in.seq_len, in.block_m, in.heads_per_gpu, in.batch, in.producers);
  t.qloop_gap_s = model::qloop_gap_lower_bound_s(t.sigma_s, in.seq_len, in.block_n);
  const double b = static_cast<double>(in.block_m) * in.head_dim * in.out_bytes;
  const double v = model::burst_volume_bytes(in.producers, b);
  const double r = platform.drain_rate_at(in.producers);
  const double t0 = platform.issue_floor_s(in.producers, b).value;
  const double dt = model::fa_a2a_issue_backpressure_s(t0, v, r, t.qloop_gap_s);
  const double crit = model::fa_a2a_critical_stall_s(dt, 0.5 * t.sigma_s);
  t.issue_s = static_cast<double>(t.waves) * t0;
  t.drain_s = static_cast<double>(t.waves) * crit;
  t.fused_s = t.fa_s + t.issue_s + t.drain_s;
  return t;
}

// ---- rows ------------------------------------------------------------------------------------------------
double PaperRow::abs_error() const { return predicted ? *predicted - published : 0.0; }
double PaperRow::rel_error() const {
  if (!predicted) return 0.0;
  return published != 0 ? (*predicted - published) / std::fabs(published) : (*predicted == 0 ? 0.0 : INFINITY);
}
bool PaperRow::within_goal() const {
  if (!predicted) return false;
  if (goal == GoalKind::kAbsolute) return std::fabs(abs_error()) <= tolerance + 1e-12;
  const double tol = goal == GoalKind::kRelative ? tolerance : 0.10;
  return std::fabs(rel_error()) <= tol + 1e-12;
}
std::string PaperRow::verdict() const {
  if (!predicted) return "not predicted";
  if (goal == GoalKind::kNone) return within_goal() ? "within 10 %" : "off > 10 %";
  return within_goal() ? "met" : "missed";
}

void check_paper_options(const PaperOptions& o) {
  if (!std::isfinite(o.a2a_rate_gbps) || o.a2a_rate_gbps <= 0 || o.a2a_rate_gbps > 1e5)
    throw InputError("a2a_rate_gbps: must be in (0, 1e5], got " + std::to_string(o.a2a_rate_gbps));
  if (!std::isfinite(o.a2a_fixed_us) || o.a2a_fixed_us < 0 || o.a2a_fixed_us > 1e6)
    throw InputError("a2a_fixed_us: must be in [0, 1e6], got " + std::to_string(o.a2a_fixed_us));
  if (o.heads_per_gpu < 1 || o.heads_per_gpu > 1024)
    throw InputError("heads_per_gpu: must be in [1, 1024], got " + std::to_string(o.heads_per_gpu));
  if (!std::isfinite(o.completion_latency_us) || o.completion_latency_us < 0 || o.completion_latency_us > 1e6)
    throw InputError("completion_latency_us: must be in [0, 1e6], got " + std::to_string(o.completion_latency_us));
  if (o.distribution_tokens.empty() || o.distribution_tokens.size() > 16)
    throw InputError("distribution_tokens: give 1 to 16 token counts");
  for (long long t : o.distribution_tokens)
    if (t < 1 || t > 65536) throw InputError("distribution_tokens: each must be in [1, 65536], got " + std::to_string(t));
}

PaperReport paper_report(const model::Platform& platform, const PaperOptions& o) {
  check_paper_options(o);
  PaperReport rep;
  rep.platform_name = platform.name;
  if (o.knee) knee_rows(platform, o, rep);
  if (o.table2) table2_rows(platform, rep);
  if (o.ecc) ecc_rows(platform, o, rep);
  if (o.distribution) distribution_rows(platform, o, rep);
  if (o.table3) table3_rows(platform, o, rep);
  add_assumptions(o, rep);
  return rep;
}

json to_json(const PaperRow& r) {
  json j = {{"id", r.id}, {"source", r.source}, {"quantity", r.quantity}, {"unit", r.unit}, {"published", r.published},
            {"predicted", r.predicted ? json(*r.predicted) : json(nullptr)},
            {"abs_error", r.predicted ? json(r.abs_error()) : json(nullptr)},
            {"rel_error", r.predicted && std::isfinite(r.rel_error()) ? json(r.rel_error()) : json(nullptr)},
            {"goal", r.goal == GoalKind::kNone ? json(nullptr)
                     : json(r.goal == GoalKind::kRelative ? "|rel error| <= " + num(100 * r.tolerance, 0) + " %"
                                                         : "|error| <= " + num(r.tolerance, 2) + " " + r.unit)},
            {"verdict", r.verdict()}, {"inputs", r.inputs}};
  if (!r.missing.empty()) j["missing"] = r.missing;
  if (!r.sensitivity.empty()) j["sensitivity"] = r.sensitivity;
  return j;
}

json to_json(const PaperReport& rep) {
  json rows = json::array();
  int met = 0, missed = 0, near = 0, off = 0, none = 0;
  for (const auto& r : rep.rows) {
    rows.push_back(to_json(r));
    const std::string v = r.verdict();
    (v == "met" ? met : v == "missed" ? missed : v == "within 10 %" ? near : v == "off > 10 %" ? off : none)++;
  }
  json as = json::array();
  for (const auto& a : rep.assumptions) as.push_back({{"id", a.id}, {"text", a.text}, {"source", a.source}});
  return {{"platform_name", rep.platform_name},
          {"rows", rows},
          {"summary", {{"rows", rep.rows.size()}, {"goal_met", met}, {"goal_missed", missed}, {"within_10_percent", near},
                       {"off_over_10_percent", off}, {"not_predicted", none}}},
          {"assumptions", as},
          {"details", rep.details}};
}

std::string to_text(const PaperReport& rep) {
  std::ostringstream out;
  out << "The X-Stage paper as a test set, platform '" << rep.platform_name << "'\n"
      << "published = the paper's value; predicted from the published inputs and the assumptions below; error = "
         "predicted - published\n\n";
  const std::vector<std::string> hdr = {"row", "unit", "published", "predicted", "error", "rel", "goal", "verdict"};
  std::vector<std::vector<std::string>> cells;
  for (const auto& r : rep.rows) {
    const json j = to_json(r);
    cells.push_back({r.id, r.unit, num(r.published, 3), r.predicted ? num(*r.predicted, 3) : "-",
                     r.predicted ? num(r.abs_error(), 3) : "-",
                     r.predicted && std::isfinite(r.rel_error()) ? num(100 * r.rel_error(), 1) + " %" : "-",
                     j["goal"].is_null() ? "(10 %)" : j["goal"].get<std::string>(), r.verdict()});
  }
  std::vector<size_t> w(hdr.size());
  for (size_t c = 0; c < hdr.size(); ++c) {
    w[c] = hdr[c].size();
    for (const auto& row : cells) w[c] = std::max(w[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& row) {
    for (size_t c = 0; c < row.size(); ++c) {
      out << row[c];
      if (c + 1 < row.size()) out << std::string(w[c] - row[c].size() + 2, ' ');
    }
    out << "\n";
  };
  line(hdr);
  size_t total = 0;
  for (size_t c : w) total += c + 2;
  out << std::string(total - 2, '-') << "\n";
  for (const auto& row : cells) line(row);
  out << "\nRows off their goal or by more than 10 %: what is missing, and the sensitivity\n";
  for (const auto& r : rep.rows) {
    if (r.within_goal()) continue;
    out << "- " << r.id << " (" << r.source << ", " << r.quantity << "): ";
    out << (r.missing.empty() ? "no mechanism named" : r.missing) << "\n";
    for (const auto& s : r.sensitivity) {
      out << "    " << s["input"].get<std::string>() << " = " << num(s["value"].get<double>(), 3) << " -> "
          << num(s["predicted"].get<double>(), 3) << " " << r.unit << "\n";
    }
  }
  if (rep.details.contains("moe84")) {
    const auto& d = rep.details["moe84"];
    out << "\n84 configurations: geomean balanced " << num(d["geomean_balanced"].get<double>(), 3) << ", skewed "
        << num(d["geomean_skewed"].get<double>(), 3) << " (paper: skewed gains more; predicted "
        << (d["predicted_direction_holds"].get<bool>() ? "the same" : "the opposite") << "), "
        << d["below_one"].get<long long>() << " below 1.000\n";
  }
  out << "\nAssumptions (each with its source)\n";
  for (const auto& a : rep.assumptions) out << "- " << a.id << ": " << a.text << " [" << a.source << "]\n";
  return out.str();
}

}  // namespace xstage::planner
