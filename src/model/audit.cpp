#include "xstage/model/audit.hpp"

#include <cmath>

#include "xstage/model/error.hpp"
#include "xstage/model/units.hpp"

namespace xstage::model {

using nlohmann::json;
using units::s_to_us;

namespace {
void require_positive(double v, const char* field) {
  if (!(v > 0.0) || !std::isfinite(v)) throw InputError(std::string(field) + " must be > 0, got " + std::to_string(v));
}
void require_nonnegative(double v, const char* field) {
  if (!(v >= 0.0) || !std::isfinite(v)) throw InputError(std::string(field) + " must be >= 0, got " + std::to_string(v));
}
}  // namespace

BurstGapAudit audit_burst_gap(const Platform& platform, const BurstGapInput& in) {
  require_positive(in.producers, "producers");
  require_positive(in.bytes_per_producer, "bytes_per_producer");
  require_nonnegative(in.gap_s, "gap");
  BurstGapAudit a{};
  a.volume_bytes = burst_volume_bytes(in.producers, in.bytes_per_producer);
  if (in.t_iss0_override_s) {
    require_positive(*in.t_iss0_override_s, "t_iss0");
    a.t_iss0_s = *in.t_iss0_override_s;
    a.t_iss0_source = LookupSource::kOverride;
  } else {
    const Lookup l = platform.issue_floor_s(in.producers, in.bytes_per_producer);
    a.t_iss0_s = l.value;
    a.t_iss0_source = l.source;
  }
  if (in.capacity_override_bytes) {
    require_positive(*in.capacity_override_bytes, "capacity");
    a.capacity_bytes = *in.capacity_override_bytes;
    a.capacity_source = LookupSource::kOverride;
  } else {
    const Lookup l = platform.capacity_bytes(in.producers);
    a.capacity_bytes = l.value;
    a.capacity_source = l.source;
  }
  const double r = a.drain_rate_bytes_per_s = platform.drain_rate_at(in.producers);
  const double v = a.volume_bytes, t0 = a.t_iss0_s, g = in.gap_s;
  a.t_iss_s = issue_time_s(t0, v, r, g);
  a.overhead_s = issue_overhead_s(t0, v, r, g);
  a.period_s = period_s(t0, v, r, g);
  a.completion_coupled_period_s = completion_coupled_period_s(v, r, g);
  a.recovery_gap_s = recovery_gap_s(t0, v, r);
  a.q_peak0_bytes = peak_outstanding_bytes(t0, v, r);
  a.isolated_t_iss_s = isolated_issue_time_ramped_s(t0, v, platform.isolated_drain_rate_at(in.producers),
                                                    a.capacity_bytes, platform.knee_ramp_s);
  a.verdict = design_test(t0, v, r, a.capacity_bytes, g);
  a.sustained_action = a.verdict.rate_bound_ok ? DesignAction::kKeep : DesignAction::kReshape;
  a.binding_bound = !a.verdict.rate_bound_ok ? "rate" : !a.verdict.capacity_bound_ok ? "capacity (aligned bursts only)" : "none";
  return a;
}

json to_json(const BurstGapAudit& a) {
  return {{"volume_bytes", a.volume_bytes},
          {"t_iss0_us", s_to_us(a.t_iss0_s)},
          {"t_iss0_source", to_string(a.t_iss0_source)},
          {"drain_rate_gbps", units::bytes_per_s_to_gbps(a.drain_rate_bytes_per_s)},
          {"capacity_bytes", a.capacity_bytes},
          {"capacity_source", to_string(a.capacity_source)},
          {"t_iss_us", s_to_us(a.t_iss_s)},
          {"overhead_us", s_to_us(a.overhead_s)},
          {"period_us", s_to_us(a.period_s)},
          {"completion_coupled_period_us", s_to_us(a.completion_coupled_period_s)},
          {"recovery_gap_us", s_to_us(a.recovery_gap_s)},
          {"q_peak0_bytes", a.q_peak0_bytes},
          {"isolated_t_iss_us", s_to_us(a.isolated_t_iss_s)},
          {"rate_bound_ok", a.verdict.rate_bound_ok},
          {"capacity_bound_ok", a.verdict.capacity_bound_ok},
          {"action", to_string(a.verdict.action)},
          {"aligned_action", to_string(a.verdict.action)},
          {"sustained_action", to_string(a.sustained_action)},
          {"binding_bound", a.binding_bound}};
}

AttentionAudit audit_attention(const Platform& platform, const AttentionInput& in) {
  require_positive(in.producers, "producers");
  require_positive(in.block_m, "block_m");
  require_positive(in.head_dim, "head_dim");
  require_positive(in.output_bytes_per_element, "output_bytes_per_element");
  require_positive(in.block_n, "block_n");
  require_positive(in.sigma_s, "sigma");
  require_positive(in.heads_per_gpu, "heads_per_gpu");
  require_positive(in.batch, "batch");
  require_nonnegative(in.completion_latency_s, "completion_latency");
  AttentionAudit a{};
  a.bytes_per_producer = static_cast<double>(in.block_m) * in.head_dim * in.output_bytes_per_element;
  a.burst = audit_burst_gap(platform, {in.producers, a.bytes_per_producer, 0.0, std::nullopt, std::nullopt});
  const double r = a.burst.drain_rate_bytes_per_s, t0 = a.burst.t_iss0_s, v = a.burst.volume_bytes;
  a.recovery_gap_s = recovery_gap_s(t0, v, r);
  a.sufficient_seq_len_tokens = sufficient_seq_len_tokens(a.recovery_gap_s, in.sigma_s, in.block_n);
  a.qk_cover_s = in.qk_cover_s >= 0.0 ? in.qk_cover_s : 0.5 * in.sigma_s;
  a.completion_cover_s = in.completion_cover_s >= 0.0 ? in.completion_cover_s : 0.5 * in.sigma_s;
  for (std::int64_t m : in.seq_lens) {
    if (m <= 0) throw InputError("seq_len must be > 0, got " + std::to_string(m));
    AttentionPoint p{};
    p.seq_len = m;
    p.qloop_gap_s = qloop_gap_lower_bound_s(in.sigma_s, m, in.block_n);
    p.issue_backpressure_s = fa_a2a_issue_backpressure_s(t0, v, r, p.qloop_gap_s);
    p.critical_stall_s = fa_a2a_critical_stall_s(p.issue_backpressure_s, a.qk_cover_s);
    const std::int64_t tiles = ceil_div(m, in.block_m) * in.heads_per_gpu * in.batch;
    p.output_bursts = ceil_div(tiles, in.producers);
    p.completion_coupled_stall_s = completion_coupled_stall_s(v, r, in.completion_latency_s, a.completion_cover_s);
    p.completion_coupled_exposed_s = completion_coupled_exposed_s(static_cast<double>(p.output_bursts),
                                                                  p.completion_coupled_stall_s);
    p.drain_residual_s = static_cast<double>(p.output_bursts) * p.critical_stall_s;
    p.tile_flop = attention_tile_flop(in.block_m, in.block_n, in.head_dim, m);
    p.verdict = design_test(t0, v, r, a.burst.capacity_bytes, p.qloop_gap_s);
    a.points.push_back(p);
  }
  return a;
}

json to_json(const AttentionAudit& a, const AttentionInput& in) {
  json j = {{"producers", in.producers},
            {"block_m", in.block_m},
            {"head_dim", in.head_dim},
            {"block_n", in.block_n},
            {"bytes_per_producer", a.bytes_per_producer},
            {"sigma_us", s_to_us(in.sigma_s)},
            {"qk_cover_us", s_to_us(a.qk_cover_s)},
            {"completion_latency_us", s_to_us(in.completion_latency_s)},
            {"completion_cover_us", s_to_us(a.completion_cover_s)},
            {"recovery_gap_us", s_to_us(a.recovery_gap_s)},
            {"m_ub_tokens", a.sufficient_seq_len_tokens},
            {"burst", to_json(a.burst)},
            {"points", json::array()}};
  for (const auto& p : a.points)
    j["points"].push_back({{"seq_len", p.seq_len},
                           {"qloop_gap_us", s_to_us(p.qloop_gap_s)},
                           {"issue_backpressure_us", s_to_us(p.issue_backpressure_s)},
                           {"critical_stall_us", s_to_us(p.critical_stall_s)},
                           {"output_bursts", p.output_bursts},
                           {"completion_coupled_stall_us", s_to_us(p.completion_coupled_stall_s)},
                           {"completion_coupled_exposed_us", s_to_us(p.completion_coupled_exposed_s)},
                           {"drain_residual_us", s_to_us(p.drain_residual_s)},
                           {"tile_flop", p.tile_flop},
                           {"rate_bound_ok", p.verdict.rate_bound_ok},
                           {"capacity_bound_ok", p.verdict.capacity_bound_ok},
                           {"action", to_string(p.verdict.action)}});
  return j;
}

MoeAudit audit_moe(const Platform& platform, const MoeInput& in) {
  require_positive(in.tile_bytes, "tile_bytes");
  require_positive(in.active_producers, "active_producers");
  require_positive(in.t_l1_mma_s, "t_l1_mma");
  require_positive(in.t_l2_mma_s, "t_l2_mma");
  require_positive(in.n1, "n1");
  require_positive(in.n2, "n2");
  require_positive(in.block_n, "block_n");
  require_positive(in.sm_count, "sm_count");
  require_positive(in.h_inter, "h_inter");
  require_nonnegative(in.staging_s, "staging");
  MoeAudit a{};
  a.volume_bytes = burst_volume_bytes(in.active_producers, in.tile_bytes);
  const Lookup floor = platform.issue_floor_s(in.active_producers, in.tile_bytes);
  a.t_iss0_s = floor.value;
  a.t_iss0_source = floor.source;
  const double r = a.drain_rate_bytes_per_s = platform.drain_rate_at(in.active_producers);
  const double v = a.volume_bytes, t0 = a.t_iss0_s;
  a.wave_gap_s = moe_wave_gap_s(in.t_l2_mma_s);
  a.interleaved_gap_s = moe_interleaved_gap_s(in.t_l1_mma_s, in.t_l2_mma_s, in.n1, in.n2);
  a.wave_issue_overhead_s = issue_overhead_s(t0, v, r, a.wave_gap_s);
  a.interleaved_issue_overhead_s = moe_interleaved_issue_overhead_s(a.wave_issue_overhead_s, in.t_l1_mma_s, in.n1, in.n2);
  a.interleaving_sufficient = moe_interleaving_sufficient(t0, v, r, in.t_l1_mma_s, in.t_l2_mma_s, in.n1, in.n2);
  a.wave_span_s = remote_store_span_s(t0, a.wave_issue_overhead_s, in.staging_s);
  a.interleaved_span_s = remote_store_span_s(t0, a.interleaved_issue_overhead_s, in.staging_s);
  a.wave_tile_stall_s = per_tile_stall_s(a.wave_span_s, in.t_l2_mma_s);
  a.interleaved_tile_stall_s = per_tile_stall_s(a.interleaved_span_s, in.t_l1_mma_s);
  a.lead_knee_rows = moe_lead_knee_rows(in.block_n, in.sm_count, in.h_inter);
  const Lookup cap = platform.capacity_bytes(in.active_producers);
  a.wave_verdict = design_test(t0, v, r, cap.value, a.wave_gap_s);
  a.interleaved_verdict = design_test(t0, v, r, cap.value, a.interleaved_gap_s);
  return a;
}

json to_json(const MoeAudit& a) {
  return {{"volume_bytes", a.volume_bytes},
          {"t_iss0_us", s_to_us(a.t_iss0_s)},
          {"t_iss0_source", to_string(a.t_iss0_source)},
          {"drain_rate_gbps", units::bytes_per_s_to_gbps(a.drain_rate_bytes_per_s)},
          {"wave_gap_us", s_to_us(a.wave_gap_s)},
          {"interleaved_gap_us", s_to_us(a.interleaved_gap_s)},
          {"wave_issue_overhead_us", s_to_us(a.wave_issue_overhead_s)},
          {"interleaved_issue_overhead_us", s_to_us(a.interleaved_issue_overhead_s)},
          {"interleaving_sufficient", a.interleaving_sufficient},
          {"wave_span_us", s_to_us(a.wave_span_s)},
          {"interleaved_span_us", s_to_us(a.interleaved_span_s)},
          {"wave_tile_stall_us", s_to_us(a.wave_tile_stall_s)},
          {"interleaved_tile_stall_us", s_to_us(a.interleaved_tile_stall_s)},
          {"lead_knee_rows", a.lead_knee_rows},
          {"wave_action", to_string(a.wave_verdict.action)},
          {"interleaved_action", to_string(a.interleaved_verdict.action)}};
}

}  // namespace xstage::model
