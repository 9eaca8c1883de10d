#include "xstage/planner/moe_plan.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "xstage/model/bounded_text.hpp"
#include "xstage/model/burst_gap.hpp"
#include "xstage/model/error.hpp"
#include "xstage/model/units.hpp"
#include "xstage/model/work_limit.hpp"
#include "xstage/model/workloads.hpp"
#include "xstage/moe/routing.hpp"
#include "xstage/sched/moe_schedule.hpp"

namespace xstage::planner {

namespace {

// Work limit of the simulation: about kBytesPerSimulatedTokenSlot per routed token slot (measured: 1 GiB at
// 2 ranks x 262144 tokens x top-8), checked before the routing is generated.
constexpr double kMaxSimulatedTokenSlots = 1 << 23;
constexpr double kBytesPerSimulatedTokenSlot = 256;

std::string tflops(double flop_per_s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", flop_per_s / 1e12);
  return buf;
}

}  // namespace

MoePlanInput moe_plan_input(const model::Platform& platform, const model::MoeKernel& k, int producers) {
  MoePlanInput out;
  out.rate = k.sm_tflops > 0 ? model::GemmRate{k.sm_tflops * 1e12, "given"} : platform.gemm_rate_at(k.precision);
  const model::MoeShape shape{k.name.c_str(), k.source.c_str(), k.hidden, k.h_inter, k.experts, k.top_k};
  out.input = model::moe_input_for_shape(shape, producers, out.rate.flop_per_s_per_sm, k.block_m, k.block_n, k.out_bytes);
  out.input.staging_s = units::us_to_s(k.staging_us);
  const std::string estimated = "estimated: " + k.precision + " at " + tflops(out.rate.flop_per_s_per_sm) +
                                " TFLOP/s per SM (" + out.rate.source + ")";
  const std::string measured = "measured" + (k.mainloop_source.empty() ? std::string() : ": " + k.mainloop_source);
  out.t_l1_source = out.t_l2_source = estimated;
  if (k.t_l1_us > 0) {
    out.input.t_l1_mma_s = units::us_to_s(k.t_l1_us);
    out.t_l1_source = measured;
  }
  if (k.t_l2_us > 0) {
    out.input.t_l2_mma_s = units::us_to_s(k.t_l2_us);
    out.t_l2_source = measured;
  }
  return out;
}

std::vector<int> rows_of_rank0(const model::MoeKernel& k) {
  // The simulation's routing, rows and tile events grow with the routed token slots (and the rows per slot for
  // block_m below 128): refuse before generating anything.
  require_work_within("plan moe --simulate: ranks " + std::to_string(k.ranks) + " x tokens " + std::to_string(k.tokens) +
                          " x top-" + std::to_string(k.top_k) +
                          (k.block_m < 128 ? " x 128 / block_m " + std::to_string(k.block_m) : std::string()),
                      static_cast<double>(k.ranks) * static_cast<double>(k.tokens) * k.top_k *
                          std::max(1.0, 128.0 / k.block_m),
                      kMaxSimulatedTokenSlots, "routed token slots", kBytesPerSimulatedTokenSlot);
  const bool generated = k.routing == "balanced" || k.routing == "skewed";
  if (!generated && !std::filesystem::exists(k.routing))
    throw InputError("routing: must be balanced, skewed or a routing file, got \"" + bounded_text(k.routing, 240) + "\"");
  const int tokens = static_cast<int>(k.tokens);
  std::vector<long long> received(k.experts, 0);
  for (int src = 0; src < k.ranks; ++src) {
    const moe::Routing r = !generated ? moe::load_routing_file(k.routing)
                           : k.routing == "balanced"
                               ? moe::balanced_routing(tokens, k.experts, k.top_k, 1000 + src)
                               : moe::skewed_routing(tokens, k.experts, k.top_k, k.zipf_s, 1000 + src);
    if (r.experts != k.experts || r.top_k != k.top_k)
      throw InputError("routing: " + bounded_text(k.routing, 240) + " routes to " + std::to_string(r.experts) +
                       " experts, top-" + std::to_string(r.top_k) + "; kernel " + bounded_text(k.name) + " has " + std::to_string(k.experts) + ", top-" +
                       std::to_string(k.top_k));
    const auto counts = moe::tokens_per_expert(r);
    for (int e = 0; e < k.experts; ++e) received[e] += counts[e];
  }
  return sim::rows_per_local_expert(received, k.ranks, 0, k.block_m);
}

nlohmann::json simulate_moe_orders(const model::Platform& platform, const model::MoeKernel& k, const MoePlanInput& in,
                                   int producers, sim::MoeOrderTimelines* timelines) {
  sim::MoeOrderParams p;
  p.rows_per_expert = rows_of_rank0(k);
  sim::set_tile_counts(in.input, p);
  p.instances = std::max(1, producers / 2);
  // The fused layer's default D (MoeFused::schedule_param) for this b_n and producer count.
  p.lead_rows = k.lead_rows > 0 ? k.lead_rows
                                : static_cast<int>(model::moe_default_lead_rows(in.input.block_n, producers,
                                                                                in.input.h_inter, k.hidden));
  p.experts_per_wave = k.experts_per_wave > 0 ? k.experts_per_wave
                                              : sched::default_experts_per_wave(static_cast<int>(p.rows_per_expert.size()));
  const sim::MoeCombineModel combine = sim::moe_combine_model(k.combine);
  const sim::MoeTileCosts costs = sim::moe_tile_costs(platform, in.input, p.instances, sim::moe_remote_share(k.ranks),
                                                       combine, 64, k.cover_slots);
  const sim::MoeOrderPrediction pred = sim::predict_moe_orders(platform, p, costs, timelines);
  nlohmann::json j = {{"routing", k.routing}, {"ranks", k.ranks}, {"tokens_per_rank", k.tokens},
                      {"producers", 2 * p.instances}, {"lead_rows", p.lead_rows},
                      {"experts_per_wave", p.experts_per_wave}, {"combine", k.combine},
                      {"staging_us", k.staging_us}, {"remote_share", sim::moe_remote_share(k.ranks)},
                      {"tile_bytes_remote", costs.tile_bytes}, {"rows", nlohmann::json(p.rows_per_expert)},
                      {"wave", sim::to_json(pred.wave)}, {"interleaved", sim::to_json(pred.interleaved)},
                      {"predicted_speedup", pred.predicted_speedup}, {"choice", sim::to_string(pred.choice)}};
  if (k.routing == "skewed") j["zipf_s"] = k.zipf_s;
  if (combine == sim::MoeCombineModel::kEpilogueIssuer) j["cover_slots"] = k.cover_slots;
  return j;
}

}  // namespace xstage::planner
