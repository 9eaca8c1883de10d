// The X-Stage paper as a test set (`xstage paper`, docs/paper_report.md): every table or figure the model
// should predict, rebuilt from the inputs the paper publishes plus stated assumptions, each row with the
// published value, the prediction, the error and a verdict. Nothing here is fitted to a result of the paper.
// The formulas are the model's (xstage/model/burst_gap.hpp, audit.hpp) and the simulator's
// (planner::simulate_moe_orders); the time models the evaluation needs and the model has nowhere else live in
// the `paper_time` functions below (one home each).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "xstage/model/platform.hpp"

namespace xstage::planner {

// ---- time models of the paper's evaluation (not paper equations; docs/paper_report.md) ---------------
// §2.3: completion-coupled per-wave time T_wave^cc ≈ max(T_L1, T_Act) + max(T_L2, T_Combine^cc) against the
// serial stage sum T_L1 + T_Act + T_L2 + T_Combine^cc: the speedup ceiling of a completion-coupled schedule.
// Throws InputError for a negative or non-finite stage time, or all zero.
double completion_coupled_wave_ceiling(double t_l1_s, double t_act_s, double t_l2_s, double t_combine_cc_s);

// FlashAttention time per KV tile σ from a measured FA-only time: T_FA = N_t·ceil(M/b_n)·σ, N_t output-tile waves
// (ceil(ceil(M/b_m)·heads·batch / K)). Throws InputError for a non-positive input.
double fa_sigma_from_time_s(double fa_time_s, long long seq_len, int block_m, int block_n, int heads_per_gpu,
                            int batch, int producers);
// Output-tile waves N_t = ceil(ceil(M/b_m)·heads·batch / K).
long long fa_output_waves(long long seq_len, int block_m, int heads_per_gpu, int batch, int producers);

// Serial All-to-All after attention: T_A2A = T_fixed + V_remote / R_a2a (a measured collective's line).
// Throws InputError for a rate <= 0, a negative fixed time or volume.
double serial_a2a_time_s(double remote_bytes, double a2a_rate_bytes_per_s, double fixed_s);

// Fused sender-visible time of the piggybacked FA–A2A kernel: T_FA plus, per output-tile wave, the
// backpressure-free issue T_iss0 and the critical-path drain stall of eq. 19 (E_drain): T_FA + N_t·(T_iss0 + Δt').
struct FusedAttentionTime {
  double fa_s = 0, issue_s = 0, drain_s = 0, fused_s = 0;
  long long waves = 0;
  double sigma_s = 0, qloop_gap_s = 0;
};
struct FusedAttentionInput {
  double fa_time_s = 0;          // measured FA-only time (the paper's Table 3 row)
  long long seq_len = 0;
  int block_m = 128, block_n = 128, head_dim = 128, out_bytes = 2;
  int heads_per_gpu = 4, batch = 1, producers = 148;
};
FusedAttentionTime fused_attention_time(const model::Platform& platform, const FusedAttentionInput& in);

// ---- the report ---------------------------------------------------------------------------------
enum class GoalKind { kNone, kRelative, kAbsolute };

struct PaperRow {
  std::string id;        // stable: "table2.qwen3.5.wave_span"
  std::string source;    // where the published value is: "Table 2", "§4.3", ...
  std::string quantity;  // what it is
  std::string unit;      // "us", "MiB", "x", "" ...
  double published = 0;
  std::optional<double> predicted;  // nullopt: not predictable from the published inputs (see missing)
  GoalKind goal = GoalKind::kNone;  // the issue's goal for this row; kNone: reported against the 10 % band
  double tolerance = 0.10;          // relative (fraction) or absolute (unit)
  std::string inputs;               // what the prediction is computed from
  std::string missing;              // off by more than 10 % or goal missed: the missing input or mechanism
  nlohmann::json sensitivity = nlohmann::json::array();  // [{"input", "value", "predicted"}, ...]

  double abs_error() const;  // predicted − published (0 when not predicted)
  double rel_error() const;  // (predicted − published)/|published|
  bool within_goal() const;  // the goal (or 10 % relative when none) holds
  std::string verdict() const;  // "met", "missed", "within 10 %", "off > 10 %", "not predicted"
};

struct PaperAssumption {
  std::string id;
  std::string text;
  std::string source;
};

// Which parts to build (all by default); the 84-configuration distribution simulates 42 distinct layers.
struct PaperOptions {
  bool knee = true, table2 = true, ecc = true, distribution = true, table3 = true;
  // The distribution's token counts per rank (the paper publishes only Table 2's 55,808 over 8 ranks).
  std::vector<long long> distribution_tokens = {1744, 3488, 6976};
  // Serial All-to-All line (Table 3): not published for the paper's platform; default the H200 pair's NCCL
  // All-to-All (results/h200-x2/ulysses: least squares over M = 8K..64K at 4 heads per GPU).
  double a2a_rate_gbps = 183.7;
  double a2a_fixed_us = 26.6;
  int heads_per_gpu = 4;  // Table 3's shape (not published; xstage's built-in paper-table3 workloads)
  double completion_latency_us = 0;  // T_lat of eq. 17 (not published)
};
// Refuses options out of range (InputError naming the field).
void check_paper_options(const PaperOptions& o);

struct PaperReport {
  std::string platform_name;
  std::vector<PaperRow> rows;
  std::vector<PaperAssumption> assumptions;
  nlohmann::json details = nlohmann::json::object();  // per-part detail (the 84 configurations, ...)
};
PaperReport paper_report(const model::Platform& platform, const PaperOptions& options = {});

nlohmann::json to_json(const PaperRow& row);
nlohmann::json to_json(const PaperReport& report);  // rows, assumptions, summary counts, details
std::string to_text(const PaperReport& report);     // the human report (report.txt)

// ---- xstage's own two-GPU results as a test set (`xstage paper --own DIR`, docs/paper_report.md) --------------
// The measured interleaved/wave ratios of the fused-MoE matrices (DIR/moe/moe_matrix.json, bf16, and
// moe_matrix_fp8.json) and the hiding ratios of the Ulysses sweep (DIR/ulysses/ulysses.json), each predicted from
// the platform file by the code `plan` and `moe bench --schedule auto` use (sim::predict_moe_schedule;
// fused_attention_time above), nothing fitted to these results.

// One configuration of a matrix that the matrix counts in its summary, as its run recorded it.
struct OwnMoeConfig {
  std::string shape, precision, routing;  // routing: "balanced" or "skewed"
  int run = 0;
  int hidden = 0, h_inter = 0, experts = 0, top_k = 0, ranks = 0;
  long long tokens_per_rank = 0;
  double zipf_s = 0;        // skewed only
  std::uint64_t seed = 0;   // the bench's seed (its check records it); the routing is regenerated from it
  int grid = 0, lead_rows = 0, experts_per_wave = 0;
  std::string combine;      // the Combine issue the timed runs used
  double wave_ms = 0, interleaved_ms = 0;  // measured medians (slower rank)
  // Recorded by the run; the regenerated routing must reproduce them.
  long long max_expert_rows = 0, experts_without_rows = 0;
  std::vector<long long> rows_received_per_rank;
  double measured_ratio() const { return wave_ms / interleaved_ms; }
};
// `j` a matrix file (schema "xstage.moe_matrix"); `origin` names it in errors. Refuses (InputError naming the file
// and field) a wrong schema, a configuration counted in the summary without its run or with a missing or
// out-of-range field.
std::vector<OwnMoeConfig> own_moe_configs_from_json(const nlohmann::json& j, const std::string& origin);
// Tokens per global expert over all ranks: the bench's per-rank routing regenerated from the recorded seed
// (balanced or Zipf-skewed). Throws InputError when it does not reproduce the run's recorded maximum rows,
// empty experts or rows received per rank.
std::vector<long long> own_moe_expert_load(const OwnMoeConfig& c);

// One point of the Ulysses sweep in the kernel's default tile order ("own-last"), sender-side medians (us), for the
// two piggyback epilogues the sweep times like for like: TMA bulk stores (fused-tma against fa-only-tma and
// serial-tma, the kernel as built) and the staged epilogue (fused against fa-only and serial-ours, pruned since).
struct OwnUlyssesPoint {
  std::string label;  // "8192 x 4", "32400 (+256) x 12"
  long long seq_image = 0, seq_text = 0, seq_total = 0;
  int heads_per_gpu = 0, head_dim = 0, grid = 0, world = 0;
  double a2a_us = 0;  // a2a-ours, standalone
  struct Pair {
    double fa_us = 0, serial_us = 0, fused_us = 0;
    double measured_hiding_ratio() const;  // 1 − (fused − fa)/(serial − fa)
  } tma, staged;
};
std::vector<OwnUlyssesPoint> own_ulysses_points_from_json(const nlohmann::json& j, const std::string& origin);

struct OwnMoeRow {
  OwnMoeConfig config;
  double measured = 0, predicted = 0;  // interleaved/wave time ratio = t_wave / t_interleaved
  double wave_makespan_us = 0, interleaved_makespan_us = 0;
  double sm_tflops = 0;
  std::string rate_source;
  double error() const { return predicted - measured; }
};
// sim::predict_moe_schedule with the run's dimensions, grid, lead, experts per wave and Combine issue, the
// platform's GEMM rate at the run's precision, and the regenerated routing.
OwnMoeRow own_moe_row(const model::Platform& platform, const OwnMoeConfig& c);

struct OwnUlyssesRow {
  OwnUlyssesPoint point;
  bool tma = true;           // which pair (OwnUlyssesPoint::tma or ::staged)
  FusedAttentionTime fused;  // predicted from the pair's measured FA-only time
  double predicted_hiding_ratio = 0;
  double measured_hiding_ratio = 0;
  const OwnUlyssesPoint::Pair& pair() const { return tma ? point.tma : point.staged; }
  double error() const { return predicted_hiding_ratio - measured_hiding_ratio; }
};
// fused_attention_time(the pair's FA-only, M, heads, K = the fused grid); H = 1 − (T_fused − T_FA)/T_A2A with T_A2A
// the measured standalone All-to-All.
OwnUlyssesRow own_ulysses_row(const model::Platform& platform, const OwnUlyssesPoint& p, bool tma);

// Median and maximum |error|, and whether the predictions order the configurations as the measurements do.
struct OwnSummary {
  int n = 0;
  double median_abs_error = 0, max_abs_error = 0;
  std::string max_at;
  double spearman = 0;      // rank correlation of predicted and measured over the configurations
  int side_agrees = 0;      // MoE: the same order predicted faster (ratio above/below 1); Ulysses: sign of H
};

struct OwnReport {
  std::string platform_name, results_dir;
  std::vector<OwnMoeRow> moe_bf16, moe_fp8;
  std::vector<OwnUlyssesRow> ulysses_tma, ulysses_staged;
  OwnSummary bf16, fp8, moe_all, uly_tma, uly_staged;
  std::vector<PaperAssumption> assumptions;
  std::vector<std::string> missing;  // mechanisms and inputs the predictions lack, where they are off
};
// Reads DIR/moe/moe_matrix.json, DIR/moe/moe_matrix_fp8.json and DIR/ulysses/ulysses.json.
OwnReport own_report(const model::Platform& platform, const std::string& results_dir);
nlohmann::json to_json(const OwnReport& report);
std::string to_text(const OwnReport& report);

}  // namespace xstage::planner
