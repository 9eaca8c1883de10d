// The design tests of `xstage plan` (plan.hpp).
#include "xstage/planner/plan.hpp"

#include <algorithm>
#include <string_view>
#include <tuple>

#include "request_args.hpp"
#include "xstage/model/burst_gap.hpp"
#include "xstage/model/error.hpp"
#include "xstage/model/kernel_description.hpp"
#include "xstage/model/workloads.hpp"
#include "xstage/moe/moe_fused_layout.hpp"
#include "xstage/planner/moe_plan.hpp"
#include "xstage/planner/requests.hpp"
#include "xstage/planner/text.hpp"
#include "xstage/sim/moe_order_simulation.hpp"

namespace xstage::planner {

namespace {

using detail::arg;
using units::us_to_s;

}  // namespace

int plan_producers(int producers, const std::string& producers_name, const std::string& platform_path,
                   const model::Platform& platform) {
  const int k = producers > 0 ? producers : platform_max_producers(platform);
  sim::require_recurring_burst_work_within(
      producers > 0 ? producers_name
                    : "platform " + platform_label(platform_path, platform) +
                          ": issue_floor: its largest producers, the default K (give a smaller " + producers_name + ")",
      k, kPlanCheckBursts);
  return k;
}

const std::vector<LegendLine> kAttentionLegend = {
    {"aligned (eq. 10)",
     "one burst of all K producers' output tiles (b_m x d each, all remote) issued at once, then the Q-loop gap "
     "G(M); the worst case, shown as context"},
    {"as built stall us",
     "the same bursts recurring every Q-loop (gap G(M)) from an aligned start with first-come service "
     "(simulated): the median producer's stall in the first burst / per later burst"},
    {"act on",
     "the as-built verdict: keep (the stores drain under the next Q-loop) or reshape (they stall every burst); "
     "a first-burst stall is paid once per launch"}};
const std::vector<LegendLine> kMoeLegend = {
    {"aligned w -> i (eq. 10)",
     "the whole Linear-2 tile's Combine (V_t per producer, all remote) from all K producers at once, gap "
     "G_wave = T_L2 or G_int = T_L2 + (n1/n2) T_L1 (eq. 12); the worst case, shown as context"},
    {"as built stall w | i us",
     "the fused kernel's piggybacked Combine: (N-1)/N of each tile remote (N = 2 ranks) in 8 chunks over the next "
     "tile's k-steps, G_wave/8 (wave) or G_int/8 (interleaved) apart, from an aligned start (simulated): the median "
     "producer's stall in the first chunk / per Linear-2 tile in steady state"},
    {"act on",
     "the as-built verdict over both orders: keep (the Combine drains under the next tile's mainloop) or reshape "
     "(change the order or the tile); \"(datasheet rate)\": the mainloop times rest on the datasheet Tensor Core rate"}};

nlohmann::json to_json(const std::vector<LegendLine>& legend) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& l : legend) a.push_back({{"column", l.column}, {"models", l.models}});
  return a;
}

std::string stall_pair(const sim::RecurringBurstCheck& b, double steady_scale) {
  return fmt_us(b.first_burst_stall_s, 2) + "/" + fmt_us(b.steady_stall_s * steady_scale, 2);
}

// ---- plan attn ---------------------------------------------------------------------------------------------------

PlanAttnRequest plan_attn_request(const nlohmann::json& request) {
  using detail::NumberRule;
  detail::Args a(request, "plan attn");
  const auto range = [](const IntRange& r) {
    return NumberRule{false, false, std::pair{double(r.lo), double(r.hi)}};
  };
  const NumberRule duration{false, false, std::pair{0.0, 1e6}};
  PlanAttnRequest r;
  // In the order of the CLI's options, whose checks run in that order.
  r.platform = a.existing_file("platform");
  r.producers = a.integer("producers", range(ranges::kProducers)).value_or(0);
  r.block_m = a.integer("block_m", range(ranges::kTileEdge)).value_or(r.block_m);
  r.head_dim = a.integer("head_dim", range(ranges::kTileEdge)).value_or(r.head_dim);
  r.block_n = a.integer("block_n", range(ranges::kTileEdge)).value_or(r.block_n);
  r.out_bytes = a.integer("out_bytes", range(ranges::kElementBytes)).value_or(r.out_bytes);
  r.sigma_us = a.number("sigma_us", {true, false, std::pair{0.0, 1e6}}).value_or(r.sigma_us);
  r.qk_cover_us = a.number("qk_cover_us", duration).value_or(r.qk_cover_us);
  r.latency_us = a.number("latency_us", duration).value_or(r.latency_us);
  r.cover_us = a.number("cover_us", duration).value_or(r.cover_us);
  r.seq = a.integer_list("seq", range(ranges::kSeqLen)).value_or(r.seq);
  r.heads_per_gpu = a.integer("heads_per_gpu", range(ranges::kHeads)).value_or(r.heads_per_gpu);
  r.batch = a.integer("batch", {true, false, std::pair{1.0, 2147483647.0}}).value_or(r.batch);
  a.done();
  return r;
}

model::AttentionInput attention_input(const PlanAttnRequest& r, int producers, bool flag_names) {
  model::AttentionInput in;
  in.producers = producers;
  in.block_m = r.block_m;
  in.head_dim = r.head_dim;
  in.block_n = r.block_n;
  in.output_bytes_per_element = r.out_bytes;
  in.sigma_s = us_to_s(r.sigma_us);
  in.qk_cover_s = r.qk_cover_us < 0 ? -1.0 : us_to_s(r.qk_cover_us);
  in.completion_latency_s = us_to_s(r.latency_us);
  in.completion_cover_s = r.cover_us < 0 ? -1.0 : us_to_s(r.cover_us);
  in.heads_per_gpu = r.heads_per_gpu;
  in.batch = r.batch;
  for (long long m : r.seq) {
    // N_t = ceil(M / b_m) * heads * batch (eq. 17) in 64-bit integers: refuse what does not fit.
    checked_product({{"ceil(" + arg(flag_names, "seq") + " " + std::to_string(m) + " / " + arg(flag_names, "block_m") +
                          " " + std::to_string(r.block_m) + ")",
                      (m + r.block_m - 1) / r.block_m},
                     {arg(flag_names, "heads_per_gpu"), r.heads_per_gpu},
                     {arg(flag_names, "batch"), r.batch}});
    in.seq_lens.push_back(m);
  }
  return in;
}

std::vector<sim::RecurringBurstCheck> attention_as_built(const model::Platform& platform, int producers,
                                                         const model::AttentionAudit& a) {
  std::vector<sim::RecurringBurstCheck> built;
  built.reserve(a.points.size());
  for (const auto& p : a.points)
    built.push_back(sim::recurring_burst_check(platform, producers, a.bytes_per_producer, p.qloop_gap_s));
  return built;
}

ActOn attention_act_on(const sim::RecurringBurstCheck& b) { return act_on(b, "output burst", "the next Q-loop"); }

// The top-level "burst" (kept for compatibility) is the aligned worst case of one burst with no gap;
// "aligned_burst_worst_case" names it so.
nlohmann::json attention_json(const model::AttentionAudit& a, const model::AttentionInput& in,
                              const std::vector<sim::RecurringBurstCheck>& built) {
  nlohmann::json j = model::to_json(a, in);
  const char* models = "one aligned burst of all K output tiles with no gap (G = 0): what the Q-loop must cover; "
                       "context, not a verdict (see act_on)";
  j["burst"]["models"] = models;
  j["aligned_burst_worst_case"] = j["burst"];
  j["drain_rate_gbps"] = units::bytes_per_s_to_gbps(a.burst.drain_rate_bytes_per_s);
  ActOn top;
  top.stall_unit = "output burst";
  std::vector<std::string> reshape_at;
  for (std::size_t i = 0; i < a.points.size(); ++i) {
    const ActOn act = attention_act_on(built[i]);
    j["points"][i]["as_built"] = as_built_json(built[i]);
    j["points"][i]["act_on"] = to_json(act);
    top.first_launch_cost_s = std::max(top.first_launch_cost_s, act.first_launch_cost_s);
    top.steady_stall_s = std::max(top.steady_stall_s, act.steady_stall_s);
    if (std::string_view(act.verdict) == kReshape) reshape_at.push_back(std::to_string(a.points[i].seq_len));
  }
  if (a.points.size() == 1) {
    top = attention_act_on(built.front());
  } else if (!reshape_at.empty()) {
    top.verdict = kReshape;
    std::string ms;
    for (const auto& m : reshape_at) ms += (ms.empty() ? "" : ", ") + m;
    top.text = "reshape at M = " + ms + ": steady stall up to " + fmt_us(top.steady_stall_s, 2) +
               " us per output burst (rate bound)";
  } else {
    top.text = "keep at every M evaluated: stores drain under the next Q-loop";
    if (top.first_launch_cost_s > 0.0) top.text += launch_cost_clause(top.first_launch_cost_s);
  }
  j["act_on"] = to_json(top);
  j["legend"] = to_json(kAttentionLegend);
  return j;
}

PlanAttnResult plan_attn(const PlanAttnRequest& r, bool flag_names) {
  PlanAttnResult out;
  out.platform = model::load_platform_or_default(r.platform);
  out.input = attention_input(r, plan_producers(r.producers, arg(flag_names, "producers"), r.platform, out.platform),
                              flag_names);
  out.audit = model::audit_attention(out.platform, out.input);
  try {
    out.as_built = attention_as_built(out.platform, out.input.producers, out.audit);
  } catch (const sim::TimeLimitError& e) {
    // The as-built check simulates bursts of b_m x d x out-bytes every Q-loop gap sigma x ceil(M / b_n).
    std::string names;
    for (const char* key : {"seq", "sigma_us", "block_n", "block_m", "head_dim", "out_bytes", "latency_us"})
      names += (names.empty() ? "" : ", ") + arg(flag_names, key);
    throw InputError(std::string(e.what()) + " (the simulated bursts are sized by " + names + " and " +
                     arg(flag_names, "producers") + ": give smaller values)");
  }
  out.json = attention_json(out.audit, out.input, out.as_built);
  stamp_output(out.json, "xstage.plan.attn/1", r.platform, out.platform);
  return out;
}

// ---- the as-built verdict of a MoE layer's Combine ----------------------------------------------------------------

int MoeAsBuilt::chunks() const { return combine == "piggyback" ? moe::kFusedCombineChunks : 1; }
double MoeAsBuilt::chunk_bytes(const model::MoeInput& in) const {
  return sim::moe_remote_share(ranks) * in.tile_bytes / chunks();
}

namespace {

sim::RecurringBurstCheck moe_as_built(const model::Platform& platform, int producers, const model::MoeInput& in,
                                      double gap_per_l2_tile_s, const MoeAsBuilt& b) {
  const double chunk = b.chunk_bytes(in);
  const double step = gap_per_l2_tile_s / b.chunks();
  return sim::recurring_burst_check(platform, producers, chunk,
                                    std::max(0.0, step - platform.issue_floor_s(producers, chunk).value),
                                    kPlanCheckBursts);
}

ActOn moe_act_on(const sim::RecurringBurstCheck& wave, const sim::RecurringBurstCheck& inter, bool datasheet_rate,
                 int chunks) {
  ActOn a;
  a.stall_unit = "Linear-2 tile";
  a.datasheet_rate = datasheet_rate;
  const double per_tile = chunks;
  const double w = wave.steady_stall_s * per_tile, i = inter.steady_stall_s * per_tile;
  const bool w_keep = wave.action == model::DesignAction::kKeep;
  const bool i_keep = inter.action == model::DesignAction::kKeep;
  a.first_launch_cost_s = std::max(first_burst_stalls(wave) ? wave.first_burst_stall_s : 0.0,
                                   first_burst_stalls(inter) ? inter.first_burst_stall_s : 0.0);
  if (w_keep && i_keep) {
    a.text = "keep: the Combine drains under the next tile's mainloop in both orders";
    if (a.first_launch_cost_s > 0.0) a.text += launch_cost_clause(a.first_launch_cost_s);
  } else {
    a.verdict = kReshape;
    a.steady_stall_s = std::max(w_keep ? 0.0 : w, i_keep ? 0.0 : i);
    if (!w_keep && i_keep)
      a.text = "reshape: run the interleaved order; the wave order stalls " + fmt_us(w, 2) +
               " us per Linear-2 tile (rate bound)";
    else if (w_keep)
      a.text = "reshape: run the expert-wave order; the interleaved order stalls " + fmt_us(i, 2) +
               " us per Linear-2 tile (rate bound)";
    else
      a.text = "reshape: steady stall " + fmt_us(w, 2) + " us per Linear-2 tile in the wave order, " + fmt_us(i, 2) +
               " in the interleaved (rate bound)";
  }
  if (datasheet_rate) a.text += " (datasheet rate)";
  return a;
}

}  // namespace

MoeVerdict moe_verdict(const model::Platform& platform, int producers, const model::MoeInput& in,
                       const model::MoeAudit& a, bool datasheet, const MoeAsBuilt& b, nlohmann::json& j) {
  const sim::RecurringBurstCheck wave = moe_as_built(platform, producers, in, a.wave_gap_s, b);
  const sim::RecurringBurstCheck inter = moe_as_built(platform, producers, in, a.interleaved_gap_s, b);
  const double chunk = b.chunk_bytes(in);
  for (const auto& [key, check, gap] : {std::tuple{"wave_as_built", wave, a.wave_gap_s},
                                        std::tuple{"interleaved_as_built", inter, a.interleaved_gap_s}}) {
    j[key] = as_built_json(check);
    j[key]["ranks"] = b.ranks;
    j[key]["combine"] = b.combine;
    j[key]["chunk_bytes"] = chunk;
    j[key]["gap_per_l2_tile_us"] = units::s_to_us(gap);
    j[key]["steady_stall_per_l2_tile_us"] = units::s_to_us(check.steady_stall_s * b.chunks());
  }
  MoeVerdict v{moe_act_on(wave, inter, datasheet, b.chunks()),
               stall_pair(wave, b.chunks()) + " | " + stall_pair(inter, b.chunks())};
  if (chunk <= 0.0) v.act.text = "keep: every Combine store is local on 1 rank; nothing enters the path";
  j["act_on"] = to_json(v.act);
  return v;
}

// ---- plan ---------------------------------------------------------------------------------------------------------

PlanRequest plan_request(const nlohmann::json& request) {
  detail::Args a(request, "plan");
  PlanRequest r;
  r.platform = a.existing_file("platform");
  // The CLI's --producers of plan: in [1, 1e6].
  r.producers = a.integer("producers", {false, false, std::pair{double(ranges::kProducers.lo),
                                                                double(ranges::kProducers.hi)}}).value_or(0);
  a.done();
  return r;
}

PlanResult plan(const PlanRequest& r, bool flag_names) {
  PlanResult out;
  const model::Platform& platform = out.platform = model::load_platform_or_default(r.platform);
  const int k = out.producers = plan_producers(r.producers, arg(flag_names, "producers"), r.platform, platform);
  // R(K): the rate of every figure below (attention, MoE eq. 12-14 and the simulations); the nominal R is in the
  // JSON for reference.
  out.drain_rate_gbps = units::bytes_per_s_to_gbps(platform.drain_rate_at(k));
  nlohmann::json& j = out.json;
  j = {{"producers", k},
       {"drain_rate_gbps", out.drain_rate_gbps},
       {"nominal_drain_rate_gbps", units::bytes_per_s_to_gbps(platform.drain_rate_bytes_per_s)},
       {"verdict_words",
        {{kKeep, "leave the bursts where they are: the next mainloop covers the drain"},
         {kReshape, "the stores stall; change the order, the tile or the gap"}}},
       {"legend", {{"attention", to_json(kAttentionLegend)}, {"moe", to_json(kMoeLegend)}}},
       {"attention", nlohmann::json::array()},
       {"moe", nlohmann::json::array()}};
  stamp_output(j, "xstage.plan/1", r.platform, platform);
  for (const auto& w : model::builtin_attention_workloads()) {
    PlanAttnRequest o;
    o.head_dim = w.head_dim;
    o.heads_per_gpu = w.heads / w.sp_degree;
    o.seq = {w.seq_len};
    const model::AttentionInput in = attention_input(o, k, flag_names);
    PlanAttentionRow row{w.name, w.seq_len, o.heads_per_gpu, model::audit_attention(platform, in), {}, {}};
    const std::vector<sim::RecurringBurstCheck> built = attention_as_built(platform, k, row.audit);
    row.as_built = built.front();
    row.act = attention_act_on(row.as_built);
    nlohmann::json wj = attention_json(row.audit, in, built);
    wj.erase("legend");  // once, at the top level
    wj["name"] = w.name;
    wj["source"] = w.source;
    wj["as_built"] = wj["points"][0]["as_built"];
    j["attention"].push_back(wj);
    out.attention.push_back(std::move(row));
  }
  // Mainloops at the platform's per-SM GEMM rate of each precision (measured by the traced kernels where
  // the platform states it, else the datasheet); Combine output is bf16 in both.
  out.rate_bf16 = platform.gemm_rate_at("bf16");
  out.rate_fp8 = platform.gemm_rate_at("fp8");
  j["gemm_rate_per_sm"] = {
      {"bf16", {{"tflops_per_sm", out.rate_bf16.flop_per_s_per_sm / 1e12}, {"source", out.rate_bf16.source}}},
      {"fp8", {{"tflops_per_sm", out.rate_fp8.flop_per_s_per_sm / 1e12}, {"source", out.rate_fp8.source}}}};
  for (const char* precision : {"bf16", "fp8"}) {
    for (const auto& s : model::builtin_moe_shapes()) {
      // The built-in description with its precision set, as `plan moe --shape NAME --precision P` reads it.
      model::KernelSource src = model::kernel_source(s.name, "--shape");
      src.json["precision"] = precision;
      const model::MoeKernel kernel =
          model::moe_kernel_from_json(src.json, src.origin + " with flags (--x-y sets field x_y)", src.base_dir);
      // The verdict rests on the datasheet Tensor Core rate where a mainloop is estimated at that rate.
      const MoePlanInput pin = moe_plan_input(platform, kernel, k);
      const bool datasheet = pin.estimated() && std::string_view(pin.rate.source) == "datasheet";
      PlanMoeRow row{std::string(s.name) + " " + precision, pin.input, model::audit_moe(platform, pin.input), {}};
      nlohmann::json mj = model::to_json(row.audit);
      mj["name"] = s.name;
      mj["precision"] = precision;
      mj["source"] = s.source;
      mj["t_l1_mma_us"] = units::s_to_us(row.input.t_l1_mma_s);
      mj["t_l2_mma_us"] = units::s_to_us(row.input.t_l2_mma_s);
      row.verdict = moe_verdict(platform, k, row.input, row.audit, datasheet, MoeAsBuilt{}, mj);
      j["moe"].push_back(mj);
      out.moe.push_back(std::move(row));
    }
  }
  return out;
}

}  // namespace xstage::planner
