// The design tests of `xstage plan` as planner functions: the built-in DiT attention and MoE workloads (`plan`),
// one attention kernel's epilogue All-to-All (`plan attn`, eq. 17-20) and the as-built verdict of a MoE layer's
// Combine that `plan` and `plan moe` share (`plan moe` itself: moe_plan.hpp). Each form takes a request (the
// command's arguments by their snake_case names) and gives the command's JSON (what `xstage plan ... --json`
// prints) with the audits behind it, from which the CLI prints its tables. The C ABI (planner_c_api.h), the Python
// planner and the CLI call these.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "xstage/model/audit.hpp"
#include "xstage/model/platform.hpp"
#include "xstage/model/units.hpp"
#include "xstage/model/workloads.hpp"
#include "xstage/planner/verdict_words.hpp"
#include "xstage/sim/design_check.hpp"

namespace xstage::planner {

// Bursts of the longest recurring-burst check plan runs (a MoE layer's as-built check).
inline constexpr int kPlanCheckBursts = 24;
// Expert-parallel ranks of the as-built MoE verdict where the command names none.
inline constexpr int kPlanRanks = 2;

// K: `producers` when > 0, else the platform's largest measured K; refused, naming `producers_name` (the given
// value) or the platform (the default), when the recurring-burst checks could not simulate it in about a second
// (sim::kMaxRecurringBurstWork).
int plan_producers(int producers, const std::string& producers_name, const std::string& platform_path,
                   const model::Platform& platform);

// One legend line per verdict column of the tables: which burst the column models.
struct LegendLine {
  const char* column;
  const char* models;
};
extern const std::vector<LegendLine> kAttentionLegend;
extern const std::vector<LegendLine> kMoeLegend;
nlohmann::json to_json(const std::vector<LegendLine>& legend);

// Stall figures of one as-built check: "first/steady" µs (steady scaled by `steady_scale`, e.g. per tile).
std::string stall_pair(const sim::RecurringBurstCheck& b, double steady_scale = 1.0);

// ---- plan attn: one attention kernel's epilogue All-to-All (eq. 17-20) --------------------------------------
struct PlanAttnRequest {
  std::string platform;  // empty: the embedded platform
  int producers = 0;     // 0: the platform's largest measured K
  int block_m = 128, head_dim = 128, block_n = 128, out_bytes = 2, heads_per_gpu = 4, batch = 1;
  double sigma_us = units::s_to_us(model::kPaperSigmaS);
  double qk_cover_us = -1, latency_us = 0, cover_us = -1;  // < 0: sigma / 2
  std::vector<long long> seq = {8192, 16384, 32768, 49152, 65536};
};
// Reads and checks a request as the CLI's flags do (the ranges of xstage/model/input_file.hpp). Throws
// RequestError naming the argument.
PlanAttnRequest plan_attn_request(const nlohmann::json& request);
// The audit input of K producers; N_t's product is checked in 64-bit integers (InputError naming the factors,
// each by `names`: the CLI's flags or the request's keys).
model::AttentionInput attention_input(const PlanAttnRequest& r, int producers, bool flag_names = false);
// As built: the output bursts recur every Q-loop; the simulator says what binds in steady state. One check per
// point of the audit, in its order.
std::vector<sim::RecurringBurstCheck> attention_as_built(const model::Platform& platform, int producers,
                                                         const model::AttentionAudit& a);
ActOn attention_act_on(const sim::RecurringBurstCheck& b);
// `plan attn`'s JSON body and each attention row of `plan`: the audit, each point's as-built check (`built`, from
// attention_as_built) and act-on verdict, and the verdict over the points.
nlohmann::json attention_json(const model::AttentionAudit& a, const model::AttentionInput& in,
                              const std::vector<sim::RecurringBurstCheck>& built);

struct PlanAttnResult {
  model::Platform platform;
  model::AttentionInput input;
  model::AttentionAudit audit;
  std::vector<sim::RecurringBurstCheck> as_built;  // per point
  nlohmann::json json;                             // xstage.plan.attn/1
};
// `flag_names`: messages name the CLI's flags (--seq) instead of the request's keys (seq).
PlanAttnResult plan_attn(const PlanAttnRequest& r, bool flag_names = false);
inline nlohmann::json plan_attn_output(const nlohmann::json& request) {
  return plan_attn(plan_attn_request(request)).json;
}

// ---- the as-built verdict of a MoE layer's Combine (`plan`, `plan moe`) ------------------------------------
// A Linear-2 tile's Combine on `ranks` ranks ((N - 1)/N of the tile remote), one Linear-2 tile per gap (G_wave in
// the expert-wave order, G_int of eq. 12 in the interleaved one). The fused kernel's piggybacked Combine issues
// it in moe::kFusedCombineChunks chunks over the next tile's k-steps; an epilogue Combine issues the tile's share
// as one burst after the tile.
struct MoeAsBuilt {
  int ranks = kPlanRanks;
  std::string combine = "piggyback";
  int chunks() const;  // bursts per Linear-2 tile
  double chunk_bytes(const model::MoeInput& in) const;  // bytes of each per producer
};
// Both orders' as-built checks and what to act on: the JSON keys wave_as_built, interleaved_as_built and act_on
// added to `j`, and the text cells (stall pairs per Linear-2 tile and the verdict).
struct MoeVerdict {
  ActOn act;
  std::string stalls;  // "first/steady | first/steady" µs per Linear-2 tile
};
MoeVerdict moe_verdict(const model::Platform& platform, int producers, const model::MoeInput& in,
                       const model::MoeAudit& a, bool datasheet_rate, const MoeAsBuilt& b, nlohmann::json& j);

// ---- plan: every built-in workload on the platform ----------------------------------------------------------
struct PlanRequest {
  std::string platform;
  int producers = 0;
};
PlanRequest plan_request(const nlohmann::json& request);

struct PlanAttentionRow {
  std::string name;
  long long seq_len = 0;
  int heads_per_gpu = 0;
  model::AttentionAudit audit;
  sim::RecurringBurstCheck as_built;
  ActOn act;
};
struct PlanMoeRow {
  std::string name;  // "<shape> <precision>"
  model::MoeInput input;
  model::MoeAudit audit;
  MoeVerdict verdict;
};
struct PlanResult {
  model::Platform platform;
  int producers = 0;
  double drain_rate_gbps = 0;  // R(K)
  model::GemmRate rate_bf16, rate_fp8;
  std::vector<PlanAttentionRow> attention;
  std::vector<PlanMoeRow> moe;
  nlohmann::json json;  // xstage.plan/1
};
PlanResult plan(const PlanRequest& r, bool flag_names = false);
inline nlohmann::json plan_output(const nlohmann::json& request) { return plan(plan_request(request)).json; }

}  // namespace xstage::planner
