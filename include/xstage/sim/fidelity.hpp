// Fidelity report: every calibration record predicted by the closed form (burst_gap.hpp through the
// platform) and by the event simulator, against its measurement (`xstage fidelity`).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "xstage/model/platform.hpp"
#include "xstage/model/records.hpp"

namespace xstage::sim {

struct FidelityPoint {
  model::CalibrationRecord record;
  bool gap_sweep = false;          // a (K, B) swept over gaps > 0
  double model_gap_s = 0.0;        // the gap the model used: recorded (or raw loop) gap + h
  double model_t_iss_s = 0.0;      // closed form: eq. 3 (periodic, gap G + h) or the smooth knee (isolated)
  double model_t_period_s = 0.0;   // period law (periodic only)
  double sim_t_iss_s = 0.0;        // simulator: the probe's statistic (median producer / slowest producer)
  double sim_t_period_s = 0.0;
};

struct ErrorSummary {
  int points = 0;
  double median_rel = 0.0;  // |pred − meas| / meas
  double max_rel = 0.0;
};

// Median and largest of relative errors |pred − meas| / meas (points: how many).
ErrorSummary summarize_errors(const std::vector<double>& rel_errors);
nlohmann::json to_json(const ErrorSummary& s);

struct FidelityReport {
  std::vector<FidelityPoint> points;  // remote records; local ones are listed as controls
  std::vector<model::CalibrationRecord> local_controls;
  // Summaries: periodic (all), gap sweep, isolated; closed form and simulator; issue time and period.
  ErrorSummary periodic_model_t_iss, periodic_model_t_period, periodic_sim_t_iss, periodic_sim_t_period;
  ErrorSummary sweep_model_t_iss, sweep_model_t_period, sweep_sim_t_iss, sweep_sim_t_period;
  ErrorSummary isolated_model_t_iss, isolated_sim_t_iss;
  ErrorSummary isolated_past_knee_model_t_iss, isolated_past_knee_sim_t_iss;  // V > Q(K)
  double local_flat_t_iss_s = 0.0;    // median local T_iss over G > 0 (the control's plateau)
  double local_zero_gap_ratio = 0.0;  // local T_iss at G = 0 over that plateau (same K, B)
  double local_drain_rate_bytes_per_s = 0.0;     // the platform's local drain (0: none stated)
  double local_zero_gap_model_t_iss_s = 0.0;     // eq. 3 at G = 0 with the local drain (0: none stated)
  double local_zero_gap_model_rel_error = 0.0;
};

// The probe's zero-gap loop gaps (raw.json), shared with the fit: xstage/model/records.hpp.
using model::ZeroGapLoop;
using model::load_zero_gap_loops;

struct FidelityOptions {
  int periodic_bursts = 40;  // simulated bursts per producer (the steady state is the second half)
  // With these, a zero-gap record's gap is its measured loop gap + h (burst_overhead); without,
  // the platform's zero_gap_overhead.
  std::vector<ZeroGapLoop> zero_gap_loops;
  // Where the records came from (a file name), in the messages that name a record: "FILE: record 3 (...)".
  std::string records_origin = "records";
};

// Eq. 15 on a traced MoE kernel (the paper's Table 2): per traced schedule with remote Combine
// stores, the predicted per-tile stall [T_RS − T_cover]_+ from the measured store span T_RS and the
// measured Linear-2 mainloop + staging as T_cover (the tile that follows: a Linear-2 tile in the wave
// order; in the interleaved order it may be a longer Linear-1 tile, so the prediction is an upper bound),
// against the measured stall: the Linear-2 MMA wait at tile entry beyond the same schedule's
// local-store control (without a control, the whole wait: an upper bound). All medians over tiles.
struct TileStallRow {
  std::string source;     // file
  std::string shape, precision, schedule;
  double store_span_s = 0.0;        // T_RS, remote
  double cover_s = 0.0;             // Linear-2 mainloop + staging, remote
  double predicted_stall_s = 0.0;   // eq. 15
  double wait_remote_s = 0.0;       // Linear-2 MMA wait at entry, remote stores
  double wait_local_s = -1.0;       // same, local-store control (< 0: no control traced)
  double measured_stall_s = 0.0;    // [wait_remote − wait_local]_+, or wait_remote without a control
  double layer_remote_s = 0.0;
  double layer_local_s = -1.0;      // < 0: no control
  double residual_s = 0.0;          // layer time remote − local (0 without a control)
  double tile_flop = 0.0;           // of one Linear-2 tile: 2·b_m·b_n·h_inter (the fused kernel's 128 × 128 tiles)
};
// Reads an `xstage.moe_bench` or `xstage.moe_bench_set` file with `trace` entries; throws InputError.
std::vector<TileStallRow> tile_stall_rows(const std::string& bench_json_path);
// The same from the file's text; `origin` names it in errors (the fuzz harnesses call this).
std::vector<TileStallRow> parse_tile_stall_rows(std::string_view text, const std::string& origin);
nlohmann::json to_json(const std::vector<TileStallRow>& rows);

// Sustained per-SM GEMM rate of the traced kernels, per precision (the platform's gemm_rate_per_sm):
// per traced schedule with remote Combine stores, rate = tile_flop / (median Linear-2 mainloop + staging),
// then the median over those schedules (both orders, every shape traced). The median spans the shapes'
// spread (bf16 on H200 x2: 4.0-6.4 TFLOP/s per SM); the planner's mainloop estimate at this rate is the
// traced span wherever a shape sits at the median.
struct GemmRateFit {
  std::string precision;
  double flop_per_s_per_sm = 0.0;  // the median
  double min_flop_per_s_per_sm = 0.0, max_flop_per_s_per_sm = 0.0;
  int schedules = 0;
  std::vector<std::string> sources;  // files, each once
};
std::vector<GemmRateFit> fit_gemm_rates(const std::vector<TileStallRow>& rows);
nlohmann::json to_json(const std::vector<GemmRateFit>& fits);

// The fused Ulysses attention (TMA epilogue) against its prediction: per sweep point, the as-built
// recurring-burst check (132 × b_m·d·2-byte output bursts every Q-loop, G_Qloop = σ·ceil(M/b_n) with the
// measured σ) plus the uncovered tail (the last round's remote bytes, remote_bytes_per_rank / N_t on
// average, drained at R(K)), against the measured residual fused-tma − fa-only-tma.
struct UlyssesRow {
  std::int64_t seq_len = 0;
  int heads_per_gpu = 0;
  std::string tile_order;
  double sigma_s = 0.0, qloop_gap_s = 0.0;
  std::int64_t output_bursts = 0;
  double first_burst_stall_s = 0.0, steady_stall_s = 0.0, tail_drain_s = 0.0;
  double predicted_residual_s = 0.0;
  const char* binding_bound = "none";
  double fa_s = 0.0;                  // fa-only-tma iteration median
  double measured_residual_s = 0.0;   // fused-tma − fa-only-tma (iteration)
};
// Reads an `xstage.ulysses_sweep/1` file; throws InputError.
std::vector<UlyssesRow> ulysses_rows(const model::Platform& platform, const std::string& sweep_json_path);
// The same from the file's text; `origin` names it in errors (the fuzz harnesses call this).
std::vector<UlyssesRow> parse_ulysses_rows(const model::Platform& platform, std::string_view text, const std::string& origin);
nlohmann::json to_json(const std::vector<UlyssesRow>& rows);

FidelityReport fidelity_report(const model::Platform& platform, const std::vector<model::CalibrationRecord>& records,
                               const FidelityOptions& options = {});
nlohmann::json to_json(const FidelityReport& report);

}  // namespace xstage::sim
