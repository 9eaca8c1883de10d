// Design audits: apply the Burst–Gap model to a kernel's bursts and gaps on a platform.
// Generic (eq. 3–7, 10), FlashAttention + A2A (eq. 17–20) and MoE (eq. 12–16).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "xstage/model/burst_gap.hpp"
#include "xstage/model/platform.hpp"

namespace xstage::model {

// ---- generic: K producers × B bytes, gap G -------------------------------------------------------
struct BurstGapInput {
  int producers = 0;
  double bytes_per_producer = 0.0;
  double gap_s = 0.0;
  std::optional<double> t_iss0_override_s;     // else from the platform at (K, B)
  std::optional<double> capacity_override_bytes;  // else from the platform at K
};

struct BurstGapAudit {
  double volume_bytes;
  double t_iss0_s;
  LookupSource t_iss0_source;
  double drain_rate_bytes_per_s;
  double capacity_bytes;
  LookupSource capacity_source;
  double t_iss_s;             // eq. 3
  double overhead_s;          // eq. 4
  double period_s;            // period law
  double completion_coupled_period_s;
  double recovery_gap_s;      // eq. 5
  double q_peak0_bytes;       // eq. 6
  double isolated_t_iss_s;    // eq. 7, with the platform's smooth knee where it has one
  DesignVerdict verdict;      // eq. 10: an aligned burst (first burst, or bursts re-aligned by a barrier)
  // Recurring bursts: producers that stalled once stay staggered (first-come service, measured on
  // the H200 pair), so only the rate bound binds in steady state; the capacity bound is the aligned
  // worst case above.
  DesignAction sustained_action;
  const char* binding_bound;  // "rate", "capacity (aligned bursts only)" or "none"
};
BurstGapAudit audit_burst_gap(const Platform& platform, const BurstGapInput& in);
nlohmann::json to_json(const BurstGapAudit& a);  // keys of `xstage model --json`

// ---- FlashAttention epilogue A2A -------------------------------------------------------------------
struct AttentionInput {
  int producers = 0;             // CTAs whose output-tile epilogues align (one per SM)
  int block_m = 128;
  int head_dim = 128;
  int output_bytes_per_element = 2;  // bf16
  int block_n = 128;
  double sigma_s = 0.0;          // measured time per KV tile of the Q-loop
  double qk_cover_s = -1.0;      // G_QK (eq. 19); < 0 → σ/2 (one QK^T mainloop of the two per KV tile)
  double completion_latency_s = 0.0;  // T_lat (eq. 17)
  double completion_cover_s = -1.0;   // T_cover (eq. 17); < 0 → σ/2
  std::vector<std::int64_t> seq_lens;  // M values to evaluate eq. 17–19 at
  int heads_per_gpu = 1;         // for the number of output-tile waves N_t
  int batch = 1;
};

struct AttentionPoint {
  std::int64_t seq_len;
  double qloop_gap_s;            // σ·ceil(M/b_n)
  double issue_backpressure_s;   // eq. 18
  double critical_stall_s;       // eq. 19
  std::int64_t output_bursts;    // N_t: waves of aligned output tiles
  double completion_coupled_stall_s;    // eq. 17 per burst
  double completion_coupled_exposed_s;  // E_cc = N_t·Δt_cc
  double drain_residual_s;       // E_drain = N_t·Δt'
  double tile_flop;              // C_FA
  DesignVerdict verdict;         // eq. 10 with G = G_Qloop(M)
};

struct AttentionAudit {
  double bytes_per_producer;
  BurstGapAudit burst;  // the aligned output burst with G = 0 (what the Q-loop must cover)
  double recovery_gap_s;  // G*
  std::int64_t sufficient_seq_len_tokens;  // eq. 20
  double qk_cover_s;
  double completion_cover_s;
  std::vector<AttentionPoint> points;
};
AttentionAudit audit_attention(const Platform& platform, const AttentionInput& in);
nlohmann::json to_json(const AttentionAudit& a, const AttentionInput& in);

// ---- MoE Combine bursts (wave vs interleaved) ------------------------------------------------------
struct MoeInput {
  double tile_bytes = 0.0;       // V_t: Combine bytes of one Linear-2 tile on one producer
  int active_producers = 0;      // K_act: producers whose tile boundaries align
  double t_l1_mma_s = 0.0;
  double t_l2_mma_s = 0.0;
  double n1 = 0.0;               // Linear-1 tiles per steady-state cycle
  double n2 = 0.0;               // Linear-2 tiles per cycle
  int block_n = 128;
  int sm_count = 0;              // K_SM
  int h_inter = 0;
  double staging_s = 0.0;        // fixed staging term of T_RS (eq. 15)
};

struct MoeAudit {
  double volume_bytes;
  double t_iss0_s;
  LookupSource t_iss0_source;
  double drain_rate_bytes_per_s;                              // R(K) at the aligned producer count
  double wave_gap_s, interleaved_gap_s;                       // eq. 12
  double wave_issue_overhead_s, interleaved_issue_overhead_s;  // eq. 4 / eq. 13
  bool interleaving_sufficient;                               // eq. 14
  double wave_span_s, interleaved_span_s;                     // T_RS
  double wave_tile_stall_s, interleaved_tile_stall_s;         // eq. 15 (cover: next L2 / next L1 mainloop)
  std::int64_t lead_knee_rows;                                // eq. 16
  DesignVerdict wave_verdict, interleaved_verdict;            // eq. 10 with the two gaps
};
MoeAudit audit_moe(const Platform& platform, const MoeInput& in);
nlohmann::json to_json(const MoeAudit& a);

}  // namespace xstage::model
