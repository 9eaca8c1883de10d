#include "xstage/planner/paper_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <sstream>

#include "xstage/model/audit.hpp"
#include "xstage/model/burst_gap.hpp"
#include "xstage/model/input_file.hpp"
#include "xstage/model/stats.hpp"
#include "xstage/moe/routing.hpp"
#include "xstage/sim/moe_order_simulation.hpp"
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
  // A quotient whose divisor is 0 on the platform given (G* = 0 where V/R <= T_iss0, say) predicts nothing.
  if (r.predicted && !std::isfinite(*r.predicted)) {
    r.predicted.reset();
    r.missing = "not defined on this platform: a quantity it divides by is 0 (" + r.inputs + ")";
  }
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
        // The description's dims are the released G/2 pair in the roles Table 2's mainloops require; the sensitivity
        // shows the released roles (hidden and h_inter exchanged back).
        const std::string swapped = "hidden/h_inter exchanged (" + std::to_string(k.h_inter) + "/" +
                                    std::to_string(k.hidden) + ")";
        const json s2 = simulate(platform, paper_kernel(t.kernel, {{"hidden", k.h_inter}, {"h_inter", k.hidden}}));
        rw.sensitivity.push_back(sens(swapped, 1, s2["wave"]["median_tile_span_us"].get<double>()));
        tw.sensitivity.push_back(sens(swapped, 1, s2["wave"]["median_mma_stall_us"].get<double>()));
        why = "the layer's dimensions: the paper does not print DiT-MoE's shape; the description takes the released "
              "G/2 dims in the roles Table 2's mainloops and DeepGEMM 7f2a703 require (its assumptions). ";
      }
      if (mw < 0.5 && t.stall_meas_wave < 0.5 && !rw.within_goal()) {
        // Load of the path in the wave's L2 run: every issuer stores V_t per L2 mainloop, rho = K V_t / (T_L2 R).
        const double kv = s["tile_bytes_remote"].get<double>() * s["producers"].get<double>();
        const double t_l2 = units::us_to_s(t.t_l2), r = platform.drain_rate_at(s["producers"].get<int>());
        const double q = platform.capacity_bytes(s["producers"].get<int>()).value;
        const double aligned = std::max(0.0, kv - q) / r;  // (V - Q)/R: an aligned burst from an empty path
        if (kv / t_l2 / r >= 1.0)
          why += "the wave's L2 run loads the path to rho = K V_t / (T_L2 R) = " + num(kv / t_l2 / r, 3) +
                 " >= 1 yet the simulated orders show no backpressure: the tiles do not align (see the rows). ";
        else
          why += "in the wave's L2 run the K = " + std::to_string(s["producers"].get<int>()) + " issuers load the path to rho = "
                 "K V_t / (T_L2 R) = " + num(kv / t_l2 / r, 3) + " < 1 (V/R = " + num(units::s_to_us(kv / r)) +
                 " us < T_L2 = " + num(t.t_l2) + " us), so the fluid model has no standing queue: a tile's span is at "
                 "most (V - Q)/R = " + num(units::s_to_us(aligned)) + " us (an aligned burst from an empty path) while "
                 "rho < 1, and near V/R' >= T_L2 once R' falls clearly below K V_t / T_L2 = " + num(kv / t_l2 / 1e9, 0) +
                 " GB/s (see sensitivity: a cliff, not a slope). The published " + num(t.span_wave) + " us lies between "
                 "the two with " + num(t.stall_meas_wave) + " us stall: a partial standing queue at rho ~ 1, which "
                 "needs what the model lacks - the variability of tile completions across issuers, or the drain rate "
                 "of the MoE's all-to-all Combine (every rank storing to 7 peers while receiving from them), which the "
                 "paper does not publish (its R is a unidirectional peer-to-peer calibration, §3, §5.1). ";
        for (double f : {0.96, 0.93, 0.90}) {
          model::Platform p2 = platform;
          p2.drain_rate_bytes_per_s = f * r;
          p2.drain_rate_by_producers.clear();  // one R' for every K
          const json s2 = simulate(p2, k);
          const std::string in = "drain rate R' GB/s (Q held; " + num(f, 2) + " R)";
          rw.sensitivity.push_back(sens(in, f * r / 1e9, s2["wave"]["median_tile_span_us"].get<double>()));
          tw.sensitivity.push_back(sens(in, f * r / 1e9, s2["wave"]["median_mma_stall_us"].get<double>()));
        }
      }
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
  out << "The X-Stage paper as a test set, platform '" << bounded_text(rep.platform_name) << "'\n"
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

// ==== xstage's own two-GPU results as a test set ===============================================================
namespace {

// The bench's per-rank routing seed (src/testing/moe_bench.cpp, make_routing): rank r of a run with seed s
// routes with s·1315423911 + 77 + r. A change there shows here as a refused configuration (the regenerated
// routing no longer reproduces the run's recorded rows).
std::uint64_t bench_rank_seed(std::uint64_t seed, int rank) { return seed * 1315423911ull + 77 + static_cast<std::uint64_t>(rank); }

// Bands a row is judged against: the planner's tie band for the MoE ratio (within it the orders count as tied,
// sim::kMoeOrderTieBand), 0.10 for H.
constexpr double kOwnMoeBand = sim::kMoeOrderTieBand;
constexpr double kOwnHidingBand = 0.10;

const json& own_member(const json& obj, const std::string& origin, const std::string& where, const char* key) {
  return json_member(obj, origin, where, key);
}
int own_int(const json& obj, const std::string& origin, const std::string& where, const char* key, const IntRange& r) {
  return static_cast<int>(json_integer_in(own_member(obj, origin, where, key), origin, json_field_path(where, key), r));
}
double own_ms(const json& obj, const std::string& origin, const std::string& where, const char* key) {
  return json_number_in(own_member(obj, origin, where, key), origin, json_field_path(where, key), ranges::kTimeMs);
}

std::vector<double> average_ranks(const std::vector<double>& x) {
  std::vector<size_t> idx(x.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
  std::vector<double> r(x.size());
  for (size_t i = 0; i < idx.size();) {
    size_t j = i;
    while (j + 1 < idx.size() && x[idx[j + 1]] == x[idx[i]]) ++j;
    for (size_t k = i; k <= j; ++k) r[idx[k]] = 0.5 * static_cast<double>(i + j);
    i = j + 1;
  }
  return r;
}
// Spearman's rank correlation (average ranks for ties); 0 when either side is constant or n < 2.
double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() < 2 || a.size() != b.size()) return 0.0;
  const auto ra = average_ranks(a), rb = average_ranks(b);
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n, mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : 0.0;
}

OwnSummary summarize(const std::vector<double>& predicted, const std::vector<double>& measured,
                     const std::vector<std::string>& names, double side) {
  OwnSummary s;
  s.n = static_cast<int>(predicted.size());
  if (predicted.empty()) return s;
  std::vector<double> abs_err;
  for (size_t i = 0; i < predicted.size(); ++i) {
    const double e = std::fabs(predicted[i] - measured[i]);
    abs_err.push_back(e);
    if (e >= s.max_abs_error) {
      s.max_abs_error = e;
      s.max_at = names[i];
    }
    s.side_agrees += (predicted[i] > side) == (measured[i] > side);
  }
  s.median_abs_error = stats::median(abs_err);
  s.spearman = spearman(predicted, measured);
  return s;
}

std::string moe_name(const OwnMoeConfig& c) {
  return c.shape + " " + c.precision + " T=" + std::to_string(c.tokens_per_rank) + " " + c.routing;
}

json to_json(const OwnSummary& s, double band) {
  return {{"n", s.n}, {"median_abs_error", s.median_abs_error}, {"max_abs_error", s.max_abs_error}, {"max_at", s.max_at},
          {"spearman_predicted_vs_measured", s.spearman}, {"same_side", s.side_agrees}, {"band", band}};
}

}  // namespace

std::vector<OwnMoeConfig> own_moe_configs_from_json(const json& j, const std::string& origin) {
  if (!j.is_object()) input_fail(origin, "(top level)", "must be a JSON object");
  const json& schema = own_member(j, origin, "", "schema");
  if (schema != "xstage.moe_matrix") input_fail(origin, "schema", "must be \"xstage.moe_matrix\", got " + bounded_json(schema));
  const std::string& precision = json_string_in(own_member(j, origin, "", "precision"), origin, "precision", 16);
  if (precision != "bf16" && precision != "fp8")
    input_fail(origin, "precision", "must be \"bf16\" or \"fp8\", got \"" + bounded_text(precision) + "\"");
  const json& configs = json_array_in(own_member(j, origin, "", "configurations"), origin, "configurations", 4096, 1);
  const json& runs = json_array_in(own_member(j, origin, "", "runs"), origin, "runs", 4096, 0);
  std::vector<OwnMoeConfig> out;
  for (size_t i = 0; i < configs.size(); ++i) {
    const std::string at = "configurations[" + std::to_string(i) + "]";
    const json& c = configs[i];
    if (!c.is_object()) input_fail(origin, at, "must be an object");
    const json& in_summary = own_member(c, origin, at, "in_summary");
    if (!in_summary.is_boolean()) input_fail(origin, at + ".in_summary", "must be true or false, got " + bounded_json(in_summary));
    if (!in_summary.get<bool>()) continue;
    OwnMoeConfig m;
    m.precision = precision;
    m.shape = json_string_in(own_member(c, origin, at, "shape"), origin, at + ".shape", 128);
    m.routing = json_string_in(own_member(c, origin, at, "routing"), origin, at + ".routing", 16);
    if (m.routing != "balanced" && m.routing != "skewed")
      input_fail(origin, at + ".routing", "must be \"balanced\" or \"skewed\", got \"" + bounded_text(m.routing) + "\"");
    m.run = own_int(c, origin, at, "primary_run", {1, 1 << 20});
    m.wave_ms = own_ms(c, origin, at, "wave_ms");
    m.interleaved_ms = own_ms(c, origin, at, "interleaved_ms");
    const json* run = nullptr;
    for (const auto& r : runs)
      if (r.is_object() && r.contains("index") && r["index"] == m.run) run = &r;
    if (!run) input_fail(origin, at + ".primary_run", "no run with index " + std::to_string(m.run) + " in runs");
    const std::string ra = "runs[index " + std::to_string(m.run) + "].result";
    const json& res = own_member(*run, origin, "runs[index " + std::to_string(m.run) + "]", "result");
    if (!res.is_object()) input_fail(origin, ra, "must be an object");
    const json& rp = own_member(res, origin, ra, "precision");
    if (rp != precision) input_fail(origin, ra + ".precision", "must be the file's \"" + precision + "\", got " + bounded_json(rp));
    const json& shape = own_member(res, origin, ra, "shape");
    const std::string sa = ra + ".shape";
    m.hidden = own_int(shape, origin, sa, "hidden", ranges::kGemmDim);
    m.h_inter = own_int(shape, origin, sa, "h_inter", ranges::kGemmDim);
    m.experts = own_int(shape, origin, sa, "experts", {1, moe::kMaxRoutingExperts});
    m.top_k = own_int(shape, origin, sa, "top_k", {1, m.experts});
    m.ranks = own_int(res, origin, ra, "ranks", {1, 1024});
    if (m.experts % m.ranks != 0)
      input_fail(origin, sa + ".experts", std::to_string(m.experts) + " experts do not split over " + std::to_string(m.ranks) + " ranks");
    m.tokens_per_rank = own_int(res, origin, ra, "tokens_per_rank", {1, moe::kMaxRoutingTokens});
    if (m.tokens_per_rank != own_int(c, origin, at, "tokens_per_rank", {1, moe::kMaxRoutingTokens}))
      input_fail(origin, at + ".tokens_per_rank", "differs from its run's");
    m.grid = own_int(res, origin, ra, "fused_grid", ranges::kFusedGrid);
    const json& routing = own_member(res, origin, ra, "routing");
    const std::string rta = ra + ".routing";
    if (own_member(routing, origin, rta, "kind") != m.routing)
      input_fail(origin, rta + ".kind", "differs from the configuration's \"" + m.routing + "\"");
    if (m.routing == "skewed")
      m.zipf_s = json_number_in(own_member(routing, origin, rta, "zipf_s"), origin, rta + ".zipf_s", {0.0, 100.0, true, false, ""});
    m.max_expert_rows = json_integer_in(own_member(routing, origin, rta, "max_expert_rows"), origin, rta + ".max_expert_rows", {0, 1LL << 40});
    m.experts_without_rows = json_integer_in(own_member(routing, origin, rta, "experts_without_rows"), origin,
                                             rta + ".experts_without_rows", {0, m.experts});
    const json& rows = json_array_in(own_member(res, origin, ra, "rows_received_per_rank"), origin,
                                     ra + ".rows_received_per_rank", m.ranks, m.ranks);
    for (size_t r = 0; r < rows.size(); ++r)
      m.rows_received_per_rank.push_back(json_integer_in(rows[r], origin, ra + ".rows_received_per_rank[" + std::to_string(r) + "]", {0, 1LL << 40}));
    const json& impls = json_array_in(own_member(res, origin, ra, "impls"), origin, ra + ".impls", 16, 1);
    bool wave = false, inter = false;
    for (size_t k = 0; k < impls.size(); ++k) {
      const std::string ia = ra + ".impls[" + std::to_string(k) + "]";
      const json& im = impls[k];
      const json& name = own_member(im, origin, ia, "name");
      if (name != "fused_wave" && name != "fused_interleaved") continue;
      const std::string combine = json_string_in(own_member(im, origin, ia, "combine"), origin, ia + ".combine", 32);
      if (m.combine.empty()) m.combine = combine;
      else if (m.combine != combine) input_fail(origin, ia + ".combine", "the two orders ran different Combine issues");
      const json& check = own_member(im, origin, ia, "check");
      const json& seed = own_member(check, origin, ia + ".check", "seed");
      if (!seed.is_number_unsigned() && !(seed.is_number_integer() && seed.get<std::int64_t>() >= 0))
        input_fail(origin, ia + ".check.seed", "must be an integer >= 0, got " + bounded_json(seed));
      m.seed = seed.get<std::uint64_t>();
      if (name == "fused_wave") {
        m.experts_per_wave = own_int(im, origin, ia, "experts_per_wave", {1, m.experts});
        wave = true;
      } else {
        m.lead_rows = own_int(im, origin, ia, "lead_rows", {1, 1 << 20});
        inter = true;
      }
    }
    if (!wave || !inter) input_fail(origin, ra + ".impls", "needs both fused_wave and fused_interleaved");
    out.push_back(std::move(m));
  }
  if (out.empty()) input_fail(origin, "configurations", "none is in the summary");
  return out;
}

std::vector<long long> own_moe_expert_load(const OwnMoeConfig& c) {
  std::vector<long long> load(c.experts, 0);
  for (int r = 0; r < c.ranks; ++r) {
    const std::uint64_t s = bench_rank_seed(c.seed, r);
    const int tokens = static_cast<int>(c.tokens_per_rank);
    const moe::Routing routing = c.routing == "balanced" ? moe::balanced_routing(tokens, c.experts, c.top_k, s)
                                                         : moe::skewed_routing(tokens, c.experts, c.top_k, c.zipf_s, s);
    const auto t = moe::tokens_per_expert(routing);
    for (int e = 0; e < c.experts; ++e) load[e] += t[e];
  }
  const int per_rank = c.experts / c.ranks;
  std::vector<long long> received(c.ranks, 0);
  for (int e = 0; e < c.experts; ++e) received[e / per_rank] += load[e];
  const long long max_rows = *std::max_element(load.begin(), load.end());
  const long long empty = std::count(load.begin(), load.end(), 0LL);
  if (max_rows != c.max_expert_rows || empty != c.experts_without_rows || received != c.rows_received_per_rank)
    throw InputError("moe configuration " + moe_name(c) + " (run " + std::to_string(c.run) + "): the routing regenerated "
                     "from seed " + std::to_string(c.seed) + " gives max " + std::to_string(max_rows) + " rows per expert, " +
                     std::to_string(empty) + " empty experts, " + std::to_string(received[0]) + " rows on rank 0; the run "
                     "recorded " + std::to_string(c.max_expert_rows) + ", " + std::to_string(c.experts_without_rows) + ", " +
                     std::to_string(c.rows_received_per_rank.empty() ? -1 : c.rows_received_per_rank[0]));
  return load;
}

double OwnUlyssesPoint::Pair::measured_hiding_ratio() const {
  return model::hiding_ratio(units::us_to_s(fused_us), units::us_to_s(fa_us), units::us_to_s(serial_us));
}

std::vector<OwnUlyssesPoint> own_ulysses_points_from_json(const json& j, const std::string& origin) {
  if (!j.is_object()) input_fail(origin, "(top level)", "must be a JSON object");
  const json& schema = own_member(j, origin, "", "schema");
  if (schema != "xstage.ulysses_sweep/1")
    input_fail(origin, "schema", "must be \"xstage.ulysses_sweep/1\", got " + bounded_json(schema));
  const json& points = json_array_in(own_member(j, origin, "", "points"), origin, "points", 4096, 1);
  std::vector<OwnUlyssesPoint> out;
  for (size_t i = 0; i < points.size(); ++i) {
    const std::string at = "points[" + std::to_string(i) + "]";
    const json& p = points[i];
    if (!p.is_object()) input_fail(origin, at, "must be an object");
    if (json_string_in(own_member(p, origin, at, "tile_order"), origin, at + ".tile_order", 32) != "own-last") continue;
    OwnUlyssesPoint u;
    u.seq_image = own_int(p, origin, at, "seq_image", ranges::kSeqLen);
    u.seq_text = json_integer_in(own_member(p, origin, at, "seq_text"), origin, at + ".seq_text", {0, ranges::kSeqLen.hi});
    u.seq_total = own_int(p, origin, at, "seq_total", ranges::kSeqLen);
    if (u.seq_total != u.seq_image + u.seq_text) input_fail(origin, at + ".seq_total", "must be seq_image + seq_text");
    u.heads_per_gpu = own_int(p, origin, at, "heads_per_gpu", ranges::kHeads);
    u.head_dim = own_int(p, origin, at, "head_dim", ranges::kTileEdge);
    u.grid = own_int(p, origin, at, "fused_grid", ranges::kProducers);
    u.world = own_int(p, origin, at, "world", {2, 1024});
    const json& variants = own_member(p, origin, at, "variants");
    const std::string va = at + ".variants";
    auto sender = [&](const char* v) {
      const json& x = own_member(variants, origin, va, v);
      return json_number_in(own_member(x, origin, va + "." + v, "sender_median_us"), origin,
                            va + "." + v + ".sender_median_us", ranges::kTimeUs);
    };
    u.a2a_us = sender("a2a-ours");
    u.tma = {sender("fa-only-tma"), sender("serial-tma"), sender("fused-tma")};
    u.staged = {sender("fa-only"), sender("serial-ours"), sender("fused")};
    if (u.tma.serial_us <= u.tma.fa_us) input_fail(origin, va + ".serial-tma", "must be longer than fa-only-tma (H is undefined)");
    if (u.staged.serial_us <= u.staged.fa_us) input_fail(origin, va + ".serial-ours", "must be longer than fa-only (H is undefined)");
    u.label = std::to_string(u.seq_image) + (u.seq_text ? " (+" + std::to_string(u.seq_text) + ")" : std::string()) +
              " x " + std::to_string(u.heads_per_gpu);
    out.push_back(std::move(u));
  }
  if (out.empty()) input_fail(origin, "points", "no point in the \"own-last\" tile order");
  return out;
}

OwnMoeRow own_moe_row(const model::Platform& platform, const OwnMoeConfig& c) {
  sim::MoeScheduleQuery q;
  q.hidden = c.hidden;
  q.h_inter = c.h_inter;
  q.experts = c.experts;
  q.top_k = c.top_k;
  q.ranks = c.ranks;
  q.grid = c.grid;
  q.lead_rows = c.lead_rows;
  q.experts_per_wave = c.experts_per_wave;
  q.precision = c.precision;
  q.combine = sim::moe_combine_model(c.combine);
  const sim::MoeSchedulePrediction sp = sim::predict_moe_schedule(platform, q, own_moe_expert_load(c));
  OwnMoeRow r;
  r.config = c;
  r.measured = c.measured_ratio();
  r.predicted = sp.predicted_speedup;
  r.wave_makespan_us = units::s_to_us(sp.wave_makespan_s);
  r.interleaved_makespan_us = units::s_to_us(sp.interleaved_makespan_s);
  r.sm_tflops = sp.sm_flop_per_s / 1e12;
  r.rate_source = sp.rate_source;
  return r;
}

OwnUlyssesRow own_ulysses_row(const model::Platform& platform, const OwnUlyssesPoint& p, bool tma) {
  OwnUlyssesRow r;
  r.point = p;
  r.tma = tma;
  FusedAttentionInput in;
  in.fa_time_s = units::us_to_s(r.pair().fa_us);
  in.seq_len = p.seq_total;
  in.head_dim = p.head_dim;
  in.heads_per_gpu = p.heads_per_gpu;
  in.producers = p.grid;
  r.fused = fused_attention_time(platform, in);
  r.predicted_hiding_ratio = model::hiding_ratio(r.fused.fused_s, r.fused.fa_s, r.fused.fa_s + units::us_to_s(p.a2a_us));
  r.measured_hiding_ratio = r.pair().measured_hiding_ratio();
  return r;
}

OwnReport own_report(const model::Platform& platform, const std::string& dir) {
  OwnReport rep;
  rep.platform_name = platform.name;
  rep.results_dir = dir;
  const std::string bf16 = dir + "/moe/moe_matrix.json", fp8 = dir + "/moe/moe_matrix_fp8.json",
                    uly = dir + "/ulysses/ulysses.json";
  const auto bf16_configs = own_moe_configs_from_json(load_json_input(bf16, "moe matrix"), bf16);
  const auto fp8_configs = own_moe_configs_from_json(load_json_input(fp8, "moe matrix"), fp8);
  const auto points = own_ulysses_points_from_json(load_json_input(uly, "ulysses sweep"), uly);
  for (const auto& c : bf16_configs) rep.moe_bf16.push_back(own_moe_row(platform, c));
  for (const auto& c : fp8_configs) rep.moe_fp8.push_back(own_moe_row(platform, c));
  for (const auto& p : points) {
    rep.ulysses_tma.push_back(own_ulysses_row(platform, p, true));
    rep.ulysses_staged.push_back(own_ulysses_row(platform, p, false));
  }

  auto moe_summary = [](const std::vector<const OwnMoeRow*>& rows) {
    std::vector<double> p, m;
    std::vector<std::string> n;
    for (const auto* r : rows) {
      p.push_back(r->predicted);
      m.push_back(r->measured);
      n.push_back(moe_name(r->config));
    }
    return summarize(p, m, n, 1.0);
  };
  std::vector<const OwnMoeRow*> b, f, all;
  for (const auto& r : rep.moe_bf16) b.push_back(&r), all.push_back(&r);
  for (const auto& r : rep.moe_fp8) f.push_back(&r), all.push_back(&r);
  rep.bf16 = moe_summary(b);
  rep.fp8 = moe_summary(f);
  rep.moe_all = moe_summary(all);
  auto uly_summary = [](const std::vector<OwnUlyssesRow>& rows) {
    std::vector<double> p, m;
    std::vector<std::string> n;
    for (const auto& r : rows) {
      p.push_back(r.predicted_hiding_ratio);
      m.push_back(r.measured_hiding_ratio);
      n.push_back(r.point.label);
    }
    return summarize(p, m, n, 0.0);
  };
  rep.uly_tma = uly_summary(rep.ulysses_tma);
  rep.uly_staged = uly_summary(rep.ulysses_staged);

  // What the predictions lack, named where a group is off its band.
  int fp8_slower = 0, fp8_pred_slower = 0;
  for (const auto& r : rep.moe_fp8) fp8_slower += r.measured < 1.0, fp8_pred_slower += r.predicted < 1.0;
  if (rep.bf16.median_abs_error > kOwnMoeBand || rep.bf16.max_abs_error > kOwnMoeBand)
    rep.missing.push_back(
        "MoE bf16 (largest miss " + rep.bf16.max_at + "): the simulator carries the X-Stage (Combine bursts into the "
        "calibrated path) and the Linear-1 -> Linear-2 row dependencies with one mainloop time per stage; it has no "
        "dispatch, no latency from a Linear-1 tile's release to the Linear-2 tile that waits on it (docs/results.md) "
        "and one bf16 rate for every shape (the platform's rate is a median over traced schedules, range in its "
        "provenance)");
  if (rep.fp8.median_abs_error > kOwnMoeBand || rep.fp8.max_abs_error > kOwnMoeBand)
    rep.missing.push_back(
        "MoE FP8: measured interleaved slower in " + std::to_string(fp8_slower) + " of " +
        std::to_string(rep.moe_fp8.size()) + " configurations, predicted slower in " + std::to_string(fp8_pred_slower) +
        ". The simulator gives both orders the same mainloop times, but the kernel's interleaved FP8 instantiation "
        "is not the wave one: it keeps local loads (one per Linear-1 k-step, about 60 per tile outside the k-loops; "
        "docs/moe_notes.md), a per-tile cost of the interleaved order alone. A mainloop time per order and precision "
        "(measured, as the platform's rate is) is the missing input; the platform's FP8 rate comes from one traced "
        "shape (qwen3, 2 schedules)");
  for (const auto* g : {&rep.ulysses_staged, &rep.ulysses_tma}) {
    const OwnSummary& sm = g == &rep.ulysses_tma ? rep.uly_tma : rep.uly_staged;
    if (sm.median_abs_error <= kOwnHidingBand && sm.max_abs_error <= kOwnHidingBand) continue;
    double lo = INFINITY, hi = -INFINITY;
    std::string negative;  // points whose fused kernel measured faster than its own FA-only
    for (const auto& r : *g) {
      const double meas = r.pair().fused_us - r.pair().fa_us, pred = units::s_to_us(r.fused.fused_s - r.fused.fa_s);
      lo = std::min(lo, meas - pred);
      hi = std::max(hi, meas - pred);
      if (meas < 0) negative += (negative.empty() ? "" : ", ") + r.point.label;
    }
    const std::string below_zero =
        negative.empty() ? std::string()
                         : ". A negative measured residual (fused faster than its own FA-only) at " + negative +
                               " is below the run's resolution (the paired per-round intervals in "
                               "ulysses/ulysses_table.md), which no model term reproduces";
    const std::string common =
        "the predicted residual T_fused − T_FA is N_t·(T_iss0 + Δt'): the issue floor per output wave plus eq. 19's "
        "drain stall (0 here: the Q-loop gap is far above G*); measured minus predicted residual is " + num(lo, 1) +
        " to " + num(hi, 1) + " us. ";
    if (g == &rep.ulysses_staged)
      rep.missing.push_back("Ulysses H, staged epilogue: " + common +
                            "The staged fused kernel's mainloop runs slower than fa-only's and the residual grows with "
                            "the attention's work (docs/ulysses_notes.md: 'its mainloop slowdown'); the model has no "
                            "term for a fused kernel's own compute slowdown" + below_zero);
    else
      rep.missing.push_back("Ulysses H, TMA bulk stores: " + common +
                            "What remains is the cost of the remote rows inside the kernel (NVLink writes arriving at "
                            "the owner while it computes, the copy engine shared between outgoing bulk stores and the "
                            "producer's TMA loads, 16 serialized bulk-copy issues per warp per tile; "
                            "docs/ulysses_notes.md), which the issue floor T_iss0 of a 32 KiB-per-producer burst does "
                            "not carry" + below_zero);
  }

  auto add = [&](std::string id, std::string text, std::string source) {
    rep.assumptions.push_back({std::move(id), std::move(text), std::move(source)});
  };
  add("platform", "every prediction reads the platform file only: R(K), T_iss0(K, B), Q(K) and the GEMM rate per SM "
      "per precision; nothing is fitted to the matrices or the sweep", "the --platform file ('" + bounded_text(platform.name) + "')");
  add("moe_predictor", "sim::predict_moe_schedule (the planner's and moe bench --schedule auto's prediction): both "
      "orders through the event simulator, slowest rank's makespan, ratio = wave makespan / interleaved makespan",
      "include/xstage/sim/moe_order_simulation.hpp");
  add("moe_launch", "dimensions, ranks, tokens, fused grid (K = 132), interleaved lead rows, experts per wave and Combine "
      "issue (piggyback) as each run recorded them", "the matrix files' runs[].result");
  add("moe_gemm_rate", "mainloop times from the platform's GEMM rate per SM at the run's precision (bf16 " +
      num(platform.gemm_rate_at("bf16").flop_per_s_per_sm / 1e12, 3) + ", FP8 " +
      num(platform.gemm_rate_at("fp8").flop_per_s_per_sm / 1e12, 3) + " TFLOP/s per SM)",
      "platform gemm_rate_per_sm (its provenance: medians over traced fused-MoE schedules at T = 8192; the matrix "
      "runs are not among its sources)");
  add("moe_staging", "no separate staging term: the platform's rate is measured over mainloop + staging, so staging "
      "sits inside the mainloop time", "moe_input_for_shape (staging 0) and the rate's formula");
  add("moe_routing", "each rank's routing regenerated from the run's recorded seed with the bench's per-rank seed "
      "(seed·1315423911 + 77 + rank), balanced or Zipf-skewed with the recorded s; checked against the run's "
      "recorded maximum rows per expert, empty experts and rows received per rank",
      "src/testing/moe_bench.cpp (make_routing), include/xstage/moe/routing.hpp");
  add("moe_measured", "measured ratio = median wave layer time / median interleaved layer time (slower rank) of the "
      "configuration's primary run; configurations the matrix leaves out of its summary are left out here",
      "moe_matrix*.json configurations[]");
  add("ulysses_points", "the sweep's points in the kernel's default tile order (own-last): 7 shapes; the two "
      "natural-order repeats are left out", "ulysses.json points[].tile_order");
  add("ulysses_measured", "H = 1 − (T_fused − T_FA)/(T_serial − T_FA) on the sender-side medians, like for like per "
      "store path: TMA bulk stores (fused-tma, fa-only-tma, serial-tma = fa-only-tma then our All-to-All; the kernel "
      "as built) and the staged epilogue (fused, fa-only, serial-ours; pruned since)",
      "MODEL.md (FA-A2A metrics); ulysses.json variants[].sender_median_us");
  add("ulysses_inputs", "inputs per point and pair: the pair's measured FA-only time (σ = T_FA / (N_t·ceil(M/128)), as the paper mode "
      "uses the published FA-only time) and the measured standalone All-to-All (a2a-ours) as T_serial − T_FA: the "
      "platform file has no All-to-All rate", "ulysses.json variants fa-only, a2a-ours");
  add("ulysses_fused", "predicted T_fused = T_FA + N_t·(T_iss0 + Δt'(M)), K = the fused grid (132), 128 x 128 bf16 "
      "output tiles, M = image + text tokens, batch 1; every output wave counted as one aligned remote burst (on two "
      "ranks half of the tiles are local, so the issue term is an upper bound)",
      "planner::fused_attention_time (eq. 18-19), as the paper mode's Table 3");
  add("bands", "a MoE row is within its band when |error| <= " + num(kOwnMoeBand, 2) + " (the planner's tie band, "
      "sim::kMoeOrderTieBand); an H row when |error| <= " + num(kOwnHidingBand, 2), "this report");
  return rep;
}

json to_json(const OwnReport& rep) {
  auto moe_rows = [](const std::vector<OwnMoeRow>& rows) {
    json a = json::array();
    for (const auto& r : rows) {
      const auto& c = r.config;
      a.push_back({{"shape", c.shape}, {"precision", c.precision}, {"tokens_per_rank", c.tokens_per_rank},
                   {"routing", c.routing}, {"run", c.run}, {"wave_ms", c.wave_ms}, {"interleaved_ms", c.interleaved_ms},
                   {"measured", r.measured}, {"predicted", r.predicted}, {"error", r.error()},
                   {"within_band", std::fabs(r.error()) <= kOwnMoeBand}, {"same_side", (r.predicted > 1.0) == (r.measured > 1.0)},
                   {"wave_makespan_us", r.wave_makespan_us}, {"interleaved_makespan_us", r.interleaved_makespan_us},
                   {"inputs", {{"grid", c.grid}, {"lead_rows", c.lead_rows}, {"experts_per_wave", c.experts_per_wave},
                               {"combine", c.combine}, {"sm_tflops", r.sm_tflops}, {"rate_source", r.rate_source},
                               {"seed", c.seed}, {"zipf_s", c.routing == "skewed" ? json(c.zipf_s) : json(nullptr)}}}});
    }
    return a;
  };
  auto uly_rows = [](const std::vector<OwnUlyssesRow>& rows) {
    json a = json::array();
    for (const auto& r : rows) {
      const auto& p = r.point;
      const auto& q = r.pair();
      a.push_back({{"point", p.label}, {"seq_total", p.seq_total}, {"heads_per_gpu", p.heads_per_gpu},
                   {"pair", r.tma ? "fused-tma / fa-only-tma / serial-tma" : "fused / fa-only / serial-ours"},
                   {"fa_only_us", q.fa_us}, {"a2a_us", p.a2a_us}, {"serial_us", q.serial_us}, {"fused_us", q.fused_us},
                   {"measured", r.measured_hiding_ratio}, {"predicted", r.predicted_hiding_ratio}, {"error", r.error()},
                   {"within_band", std::fabs(r.error()) <= kOwnHidingBand},
                   {"measured_residual_us", q.fused_us - q.fa_us},
                   {"predicted_residual_us", units::s_to_us(r.fused.fused_s - r.fused.fa_s)},
                   {"predicted_fused_us", units::s_to_us(r.fused.fused_s)},
                   {"waves", r.fused.waves}, {"sigma_us", units::s_to_us(r.fused.sigma_s)},
                   {"issue_us", units::s_to_us(r.fused.issue_s)}, {"drain_us", units::s_to_us(r.fused.drain_s)}});
    }
    return a;
  };
  json as = json::array();
  for (const auto& a : rep.assumptions) as.push_back({{"id", a.id}, {"text", a.text}, {"source", a.source}});
  return {{"platform_name", rep.platform_name},
          {"results_dir", rep.results_dir},
          {"moe_bf16", moe_rows(rep.moe_bf16)},
          {"moe_fp8", moe_rows(rep.moe_fp8)},
          {"ulysses_tma", uly_rows(rep.ulysses_tma)},
          {"ulysses_staged", uly_rows(rep.ulysses_staged)},
          {"summary", {{"moe_bf16", to_json(rep.bf16, kOwnMoeBand)}, {"moe_fp8", to_json(rep.fp8, kOwnMoeBand)},
                       {"moe_all", to_json(rep.moe_all, kOwnMoeBand)}, {"ulysses_tma", to_json(rep.uly_tma, kOwnHidingBand)},
                       {"ulysses_staged", to_json(rep.uly_staged, kOwnHidingBand)}}},
          {"missing", rep.missing},
          {"assumptions", as}};
}

std::string to_text(const OwnReport& rep) {
  std::ostringstream out;
  out << "xstage's own two-GPU results as a test set (" << bounded_text(rep.results_dir, 240) << "), platform '"
      << bounded_text(rep.platform_name) << "'\n"
      << "predicted from the platform file and each run's recorded launch; error = predicted - measured\n";
  auto table = [&](const std::vector<std::string>& hdr, const std::vector<std::vector<std::string>>& cells) {
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
  };
  auto summary = [&](const char* what, const OwnSummary& s, double band, const char* side) {
    out << what << ": n " << s.n << ", median |error| " << num(s.median_abs_error, 3) << ", max |error| "
        << num(s.max_abs_error, 3) << " (" << s.max_at << "), " << side << " " << s.side_agrees << "/" << s.n
        << ", Spearman " << num(s.spearman, 2) << " (band " << num(band, 2) << ")\n";
  };
  for (const auto* group : {&rep.moe_bf16, &rep.moe_fp8}) {
    if (group->empty()) continue;
    out << "\nFused MoE, " << group->front().config.precision << ": interleaved/wave = t_wave / t_interleaved\n";
    std::vector<std::vector<std::string>> cells;
    for (const auto& r : *group) {
      const auto& c = r.config;
      cells.push_back({c.shape, std::to_string(c.tokens_per_rank), c.routing, num(r.measured, 3), num(r.predicted, 3),
                       num(r.error(), 3), std::fabs(r.error()) <= kOwnMoeBand ? "within" : "off",
                       (r.predicted > 1.0) == (r.measured > 1.0) ? "yes" : "no"});
    }
    table({"shape", "T/rank", "routing", "measured", "predicted", "error", "band", "same order faster"}, cells);
  }
  for (const auto* g : {&rep.ulysses_tma, &rep.ulysses_staged}) {
    if (g->empty()) continue;
    out << (g == &rep.ulysses_tma ? "\nUlysses, TMA bulk stores (fused-tma vs fa-only-tma, serial-tma)"
                                  : "\nUlysses, staged epilogue (fused vs fa-only, serial-ours)")
        << ", sender side: H = 1 - (fused - FA)/(serial - FA); us\n";
    std::vector<std::vector<std::string>> cells;
    for (const auto& r : *g) {
      const auto& q = r.pair();
      cells.push_back({r.point.label, num(q.fa_us, 1), num(r.point.a2a_us, 1), num(q.fused_us - q.fa_us, 1),
                       num(units::s_to_us(r.fused.fused_s - r.fused.fa_s), 1), num(r.measured_hiding_ratio, 3),
                       num(r.predicted_hiding_ratio, 3), num(r.error(), 3),
                       std::fabs(r.error()) <= kOwnHidingBand ? "within" : "off"});
    }
    table({"point", "FA-only", "A2A", "residual meas", "residual pred", "H measured", "H predicted", "error", "band"}, cells);
  }
  out << "\n";
  summary("MoE bf16", rep.bf16, kOwnMoeBand, "same order faster");
  summary("MoE FP8", rep.fp8, kOwnMoeBand, "same order faster");
  summary("MoE all", rep.moe_all, kOwnMoeBand, "same order faster");
  summary("Ulysses H, TMA", rep.uly_tma, kOwnHidingBand, "same sign of H");
  summary("Ulysses H, staged", rep.uly_staged, kOwnHidingBand, "same sign of H");
  if (!rep.missing.empty()) {
    out << "\nWhere the predictions are off: what is missing\n";
    for (const auto& m : rep.missing) out << "- " << m << "\n";
  }
  out << "\nAssumptions (each with its source)\n";
  for (const auto& a : rep.assumptions) out << "- " << a.id << ": " << a.text << " [" << a.source << "]\n";
  return out.str();
}

}  // namespace xstage::planner
