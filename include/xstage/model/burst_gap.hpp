// The Burst–Gap model of X-Stage (docs: ../shared/docs/MODEL.md, the paper's §3–§4).
// One function per formula; every other layer (CLI, audits, simulator tests, kernels' reports) calls
// these. Units: seconds, bytes, bytes per second.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace xstage::model {

// [x]_+
constexpr double positive_part(double x) { return x > 0.0 ? x : 0.0; }

// Aggregate burst volume V = K·B.
constexpr double burst_volume_bytes(int producers, double bytes_per_producer) {
  return static_cast<double>(producers) * bytes_per_producer;
}

// Eq. 1: drain-dominated steady state, T_period = V / R.
constexpr double drain_time_s(double volume_bytes, double drain_rate_bytes_per_s) {
  return volume_bytes / drain_rate_bytes_per_s;
}

// Eq. 2: T_period = T_iss + G.
constexpr double period_from_issue_s(double issue_time_s, double gap_s) { return issue_time_s + gap_s; }

// Eq. 3: T_iss(G; K, V) = max(T_iss0, V/R − G).
constexpr double issue_time_s(double t_iss0_s, double volume_bytes, double drain_rate_bytes_per_s,
                              double gap_s) {
  return std::max(t_iss0_s, drain_time_s(volume_bytes, drain_rate_bytes_per_s) - gap_s);
}

// Eq. 4: ΔT_iss = [V/R − G − T_iss0]_+.
constexpr double issue_overhead_s(double t_iss0_s, double volume_bytes, double drain_rate_bytes_per_s,
                                  double gap_s) {
  return positive_part(drain_time_s(volume_bytes, drain_rate_bytes_per_s) - gap_s - t_iss0_s);
}

// Eq. 5: recovery gap G* = [V/R − T_iss0]_+; for G ≥ G*, T_iss = T_iss0.
constexpr double recovery_gap_s(double t_iss0_s, double volume_bytes, double drain_rate_bytes_per_s) {
  return positive_part(drain_time_s(volume_bytes, drain_rate_bytes_per_s) - t_iss0_s);
}

// Period law: T_period = max(T_iss0 + G, V/R).
constexpr double period_s(double t_iss0_s, double volume_bytes, double drain_rate_bytes_per_s,
                          double gap_s) {
  return std::max(t_iss0_s + gap_s, drain_time_s(volume_bytes, drain_rate_bytes_per_s));
}

// Completion-coupled counterfactual of the period law: the issuer waits for remote completion of
// each burst before its gap starts, so T_period^cc = G + V/R.
constexpr double completion_coupled_period_s(double volume_bytes, double drain_rate_bytes_per_s,
                                             double gap_s) {
  return gap_s + drain_time_s(volume_bytes, drain_rate_bytes_per_s);
}

// Eq. 6: peak outstanding volume of an isolated burst with no capacity limit, q_peak0 = [V − R·T_iss0]_+.
constexpr double peak_outstanding_bytes(double t_iss0_s, double volume_bytes,
                                        double drain_rate_bytes_per_s) {
  return positive_part(volume_bytes - drain_rate_bytes_per_s * t_iss0_s);
}

// Eq. 7: isolated burst issue time T_iss^iso = max(T_iss0, (V − Q)/R).
constexpr double isolated_issue_time_s(double t_iss0_s, double volume_bytes,
                                       double drain_rate_bytes_per_s, double capacity_bytes) {
  return std::max(t_iss0_s, (volume_bytes - capacity_bytes) / drain_rate_bytes_per_s);
}

// Eq. 6 at the knee (q_peak0 = Q): V_knee = Q + R·T_iss0, and its inverse Q = V_knee − R·T_iss0.
constexpr double knee_volume_bytes(double t_iss0_s, double drain_rate_bytes_per_s, double capacity_bytes) {
  return capacity_bytes + drain_rate_bytes_per_s * t_iss0_s;
}
constexpr double capacity_from_knee_bytes(double t_iss0_s, double knee_volume_bytes,
                                          double drain_rate_bytes_per_s) {
  return knee_volume_bytes - drain_rate_bytes_per_s * t_iss0_s;
}

// ---- measured refinements (not paper equations; docs/model.md "Fidelity on the H200 pair") -------
// Probe bookkeeping: a producer spends a fixed time h per burst outside both its issue and its
// recorded gap (CTA barriers, clock reads; for a zero-gap record also the loop's own cycles, which
// the records count as G = 0). Eq. 3–5 and the period law see the gap G + h.
constexpr double effective_gap_s(double recorded_gap_s, double overhead_s) { return recorded_gap_s + overhead_s; }

// Drain of an aligned burst that has filled the X-Stage: the drain rate ramps up as R·(1 − e^{−t/τ}),
// so by time t the path has drained D(t) = R·(t − τ·(1 − e^{−t/τ})) (τ = 0: R·t, eq. 7's line).
inline double ramped_drained_bytes(double t_s, double drain_rate_bytes_per_s, double ramp_s) {
  if (ramp_s <= 0.0) return drain_rate_bytes_per_s * t_s;
  return drain_rate_bytes_per_s * (t_s - ramp_s * (1.0 - std::exp(-t_s / ramp_s)));
}
// Isolated burst with the ramped drain (the smooth knee): the last byte is accepted when the bytes
// beyond the capacity have drained, D(T) = V − Q; T_iss^iso = max(T_floor, T). With τ = 0 this is
// eq. 7. For T ≫ τ, T ≈ (V − Q)/R + τ: past the knee the line of eq. 7 moves up by τ, and near the
// knee the curve is steeper than 1/R (the drain has not reached R yet).
inline double isolated_issue_time_ramped_s(double floor_s, double volume_bytes, double drain_rate_bytes_per_s,
                                           double capacity_bytes, double ramp_s) {
  const double excess = volume_bytes - capacity_bytes;
  if (excess <= 0.0) return floor_s;
  // D is increasing in t; bisection on [0, excess/R + τ], where D ≥ excess.
  double lo = 0.0, hi = excess / drain_rate_bytes_per_s + ramp_s;
  for (int i = 0; i < 100 && hi - lo > 1e-9 * hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    (ramped_drained_bytes(mid, drain_rate_bytes_per_s, ramp_s) < excess ? lo : hi) = mid;
  }
  return std::max(floor_s, hi);
}

// Eq. 10: design test for recurring bursts. keep: leave the bursts where they are, the gap covers the drain
// (the paper's "piggyback" regime; the word is kept for the MoE kernel's Combine issue mode); reshape: they stall.
enum class DesignAction { kKeep, kReshape };
constexpr const char* to_string(DesignAction a) { return a == DesignAction::kKeep ? "keep" : "reshape"; }

struct DesignVerdict {
  bool rate_bound_ok;      // V/R ≤ T_iss0 + G
  bool capacity_bound_ok;  // [V − R·T_iss0]_+ ≤ Q
  DesignAction action;     // both hold → keep, else reshape
};
constexpr bool rate_bound_ok(double t_iss0_s, double volume_bytes, double drain_rate_bytes_per_s,
                             double gap_s) {
  return drain_time_s(volume_bytes, drain_rate_bytes_per_s) <= t_iss0_s + gap_s;
}
constexpr bool capacity_bound_ok(double t_iss0_s, double volume_bytes, double drain_rate_bytes_per_s,
                                 double capacity_bytes) {
  return peak_outstanding_bytes(t_iss0_s, volume_bytes, drain_rate_bytes_per_s) <= capacity_bytes;
}
constexpr DesignVerdict design_test(double t_iss0_s, double volume_bytes, double drain_rate_bytes_per_s,
                                    double capacity_bytes, double gap_s) {
  const bool rate = rate_bound_ok(t_iss0_s, volume_bytes, drain_rate_bytes_per_s, gap_s);
  const bool cap = capacity_bound_ok(t_iss0_s, volume_bytes, drain_rate_bytes_per_s, capacity_bytes);
  return {rate, cap, (rate && cap) ? DesignAction::kKeep : DesignAction::kReshape};
}

// Eq. 11: in the drain-dominated regime T_iss + G = V/R, so useful work moved into the gap reduces
// issue stall one for one: the issue time that remains when the gap is G.
constexpr double drain_dominated_issue_time_s(double volume_bytes, double drain_rate_bytes_per_s,
                                              double gap_s) {
  return drain_time_s(volume_bytes, drain_rate_bytes_per_s) - gap_s;
}

// ---- MoE (paper §4.2) -------------------------------------------------------------------------
// Eq. 12: gaps per steady-state cycle. Wave: G ≈ T_L2^mma. Interleaved: G ≈ T_L2^mma + (n1/n2)·T_L1^mma.
constexpr double moe_wave_gap_s(double t_l2_mma_s) { return t_l2_mma_s; }
constexpr double moe_interleaved_gap_s(double t_l1_mma_s, double t_l2_mma_s, double n1, double n2) {
  return t_l2_mma_s + (n1 / n2) * t_l1_mma_s;
}
// Eq. 13: ΔT_iss^int = [ΔT_iss^wave − (n1/n2)·T_L1^mma]_+.
constexpr double moe_interleaved_issue_overhead_s(double wave_issue_overhead_s, double t_l1_mma_s, double n1,
                                                  double n2) {
  return positive_part(wave_issue_overhead_s - (n1 / n2) * t_l1_mma_s);
}
// Eq. 14: interleaving suffices when n2·V / (n2·(T_iss0 + T_L2^mma) + n1·T_L1^mma) ≤ R.
constexpr bool moe_interleaving_sufficient(double t_iss0_s, double volume_bytes, double drain_rate_bytes_per_s,
                                           double t_l1_mma_s, double t_l2_mma_s, double n1, double n2) {
  return n2 * volume_bytes / (n2 * (t_iss0_s + t_l2_mma_s) + n1 * t_l1_mma_s) <= drain_rate_bytes_per_s;
}
// Eq. 15: T_RS ≈ T_iss0 + ΔT_iss + fixed staging; per-tile compute stall Δt = [T_RS − T_cover^mma]_+.
constexpr double remote_store_span_s(double t_iss0_s, double issue_overhead_s, double staging_s) {
  return t_iss0_s + issue_overhead_s + staging_s;
}
constexpr double per_tile_stall_s(double remote_store_span_s, double cover_mma_s) {
  return positive_part(remote_store_span_s - cover_mma_s);
}
// Eq. 16: anti-starvation lead D_knee = ceil(b_n·K_SM / (2·h_inter)) scheduler rows.
constexpr std::int64_t moe_lead_knee_rows(std::int64_t block_n, std::int64_t sm_count, std::int64_t h_inter) {
  return (block_n * sm_count + 2 * h_inter - 1) / (2 * h_inter);
}
// Default lead of the interleaved order (not a paper equation; the fused layer's and the planner's
// D, docs/model.md): D = max(D_knee, D_dep) with the row-dependency floor
//   D_dep = ceil(G / P_1) + 1 + ceil(G · h_inter / (P_1 · hidden)),
//   G = producers / 2 scheduler instances (CTA pairs), P_1 = ceil(h_inter / b_n) Linear-1 pairs per row.
// A Linear-2 tile of row p reads every Linear-1 tile of row p, computed by any instance; an instance emits
// it once its own Linear-1 cursor is D rows past p. ceil(G / P_1) is the rows one grid step of the G
// instances covers; + 1 because the row holding the instance's cursor is only partly computed while the
// G - 1 cursors behind it may still be in flight (instances in lockstep need D >= 1 + ceil((G - 1) / P_1)
// to never wait); the last term is the skew between instances: an instance that has just run a
// Linear-2 tile (K = h_inter) is T_L2 / T_L1 = h_inter / hidden Linear-1 tiles (K = hidden) behind the
// others, h_inter / hidden grid steps of G / P_1 rows each. Measured with results/h200/moe/moe_lead_1gpu.json
// (one GPU, T = 16384, bf16 and FP8, both leads in one script): dit-moe 4 -> 9 (interleaved / wave time
// 1.114 -> 1.026 bf16, 1.030 -> 0.998 FP8), geometric mean over the 7 shapes x 2 precisions 0.988 -> 0.972.
constexpr std::int64_t moe_default_lead_rows(std::int64_t block_n, std::int64_t producers, std::int64_t h_inter,
                                             std::int64_t hidden) {
  const std::int64_t instances = producers / 2 > 1 ? producers / 2 : 1;
  const std::int64_t pairs_per_row = (h_inter + block_n - 1) / block_n;
  const std::int64_t step_rows = (instances + pairs_per_row - 1) / pairs_per_row;
  const std::int64_t skew_rows = (instances * h_inter + pairs_per_row * hidden - 1) / (pairs_per_row * hidden);
  const std::int64_t dependency_floor = step_rows + 1 + skew_rows;
  const std::int64_t knee = moe_lead_knee_rows(block_n, producers, h_inter);
  return knee > dependency_floor ? knee : dependency_floor;
}

// ---- FlashAttention + A2A (paper §4.3) --------------------------------------------------------
constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// KV tiles per output tile: ceil(M / b_n).
constexpr std::int64_t kv_tiles(std::int64_t seq_len, std::int64_t block_n) { return ceil_div(seq_len, block_n); }
// Attention work per output tile, C_FA = 4·b_m·b_n·d·ceil(M/b_n) FLOP.
constexpr double attention_tile_flop(std::int64_t block_m, std::int64_t block_n, std::int64_t head_dim,
                                     std::int64_t seq_len) {
  return 4.0 * static_cast<double>(block_m) * static_cast<double>(block_n) * static_cast<double>(head_dim) *
         static_cast<double>(kv_tiles(seq_len, block_n));
}
// Equivalent GEMM depth k_equiv = 2·d·ceil(M/b_n).
constexpr std::int64_t attention_equivalent_depth(std::int64_t head_dim, std::int64_t seq_len,
                                                  std::int64_t block_n) {
  return 2 * head_dim * kv_tiles(seq_len, block_n);
}
// Q-loop gap lower bound G_Qloop(M) ≥ σ·ceil(M/b_n).
constexpr double qloop_gap_lower_bound_s(double sigma_s, std::int64_t seq_len, std::int64_t block_n) {
  return sigma_s * static_cast<double>(kv_tiles(seq_len, block_n));
}
// Eq. 17: completion-coupled exposed time per aligned output burst, Δt_cc = [V/R + T_lat − T_cover]_+;
// E_cc = N_t·Δt_cc grows ∝ M through N_t.
constexpr double completion_coupled_stall_s(double volume_bytes, double drain_rate_bytes_per_s,
                                            double latency_s, double cover_s) {
  return positive_part(drain_time_s(volume_bytes, drain_rate_bytes_per_s) + latency_s - cover_s);
}
constexpr double completion_coupled_exposed_s(double bursts, double stall_per_burst_s) {
  return bursts * stall_per_burst_s;
}
// Eq. 18: FA-A2A issue backpressure Δt(M) = [V/R − G_Qloop(M) − T_iss0]_+.
constexpr double fa_a2a_issue_backpressure_s(double t_iss0_s, double volume_bytes,
                                             double drain_rate_bytes_per_s, double qloop_gap_s) {
  return issue_overhead_s(t_iss0_s, volume_bytes, drain_rate_bytes_per_s, qloop_gap_s);
}
// Eq. 19: what reaches the compute critical path, Δt'(M) = [Δt(M) − G_QK]_+.
constexpr double fa_a2a_critical_stall_s(double issue_backpressure_s, double qk_cover_s) {
  return positive_part(issue_backpressure_s - qk_cover_s);
}
// Eq. 20: sufficient sequence length M_ub* = b_n·ceil(G*/σ).
inline std::int64_t sufficient_seq_len_tokens(double recovery_gap_s, double sigma_s, std::int64_t block_n) {
  return block_n * static_cast<std::int64_t>(std::ceil(recovery_gap_s / sigma_s));
}

// ---- metrics ---------------------------------------------------------------------------------
// E_res = T_fused − T_FA.
constexpr double residual_s(double fused_s, double compute_only_s) { return fused_s - compute_only_s; }
// Hiding ratio H = 1 − (T_fused − T_FA)/(T_serial − T_FA).
constexpr double hiding_ratio(double fused_s, double compute_only_s, double serial_s) {
  return 1.0 - (fused_s - compute_only_s) / (serial_s - compute_only_s);
}
// Speedup = T_baseline / T_new (T_serial/T_fused for FA-A2A; T_wave/T_interleaved for MoE).
constexpr double speedup(double baseline_s, double improved_s) { return baseline_s / improved_s; }
// Ideal S_max ≈ 1 + T_A2A/T_FA.
constexpr double ideal_speedup(double comm_s, double compute_s) { return 1.0 + comm_s / compute_s; }

}  // namespace xstage::model
