#include "xstage/planner/moe_plan.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string_view>
#include <utility>

#include "request_args.hpp"
#include "xstage/model/bounded_text.hpp"
#include "xstage/model/burst_gap.hpp"
#include "xstage/model/error.hpp"
#include "xstage/model/units.hpp"
#include "xstage/model/work_limit.hpp"
#include "xstage/model/workloads.hpp"
#include "xstage/moe/routing.hpp"
#include "xstage/planner/requests.hpp"
#include "xstage/planner/text.hpp"
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

// ---- plan moe ----------------------------------------------------------------------------------------------------

nlohmann::json PlanMoeRequest::fields() const {
  // Each field of the parser's key list that is an argument of the request, by its name.
  const auto value = [this](std::string_view field) -> nlohmann::json {
    const auto integer = [](const auto& v) { return v && *v != 0 ? nlohmann::json(*v) : nlohmann::json(); };
    const auto given = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
    const std::pair<const char*, nlohmann::json> arguments[] = {
        {"hidden", integer(hidden)},         {"h_inter", integer(h_inter)},       {"experts", integer(experts)},
        {"top_k", integer(top_k)},           {"ranks", integer(ranks)},           {"tokens", integer(tokens)},
        {"precision", given(precision)},     {"routing", given(routing)},         {"zipf_s", given(zipf_s)},
        {"block_m", integer(block_m)},       {"block_n", integer(block_n)},       {"out_bytes", integer(out_bytes)},
        {"t_l1_us", given(t_l1_us)},         {"t_l2_us", given(t_l2_us)},         {"sm_tflops", given(sm_tflops)},
        {"combine", given(combine)},         {"staging_us", given(staging_us)},   {"cover_slots", integer(cover_slots)},
        {"lead_rows", integer(lead_rows)},   {"experts_per_wave", integer(experts_per_wave)}};
    for (const auto& [name, v] : arguments)
      if (field == name) return v;
    return nullptr;  // a field no argument sets (name, description, ...)
  };
  nlohmann::json f = nlohmann::json::object();
  for (const char* field : model::moe_kernel_fields())
    if (nlohmann::json v = value(field); !v.is_null()) f[field] = std::move(v);
  return f;
}

PlanMoeRequest plan_moe_request(const nlohmann::json& request) {
  using detail::NumberRule;
  detail::Args a(request, "plan moe");
  // The CLI's validators: an integer range of the file loaders written in full, in_range's with %g.
  const auto integers = [](const IntRange& r) {
    return NumberRule{false, false, std::pair{double(r.lo), double(r.hi)}, true};
  };
  const auto in_range = [](double lo, double hi) { return NumberRule{false, false, std::pair{lo, hi}}; };
  const NumberRule duration = in_range(0.0, 1e6);
  const NumberRule positive_duration{true, false, std::pair{0.0, 1e6}};
  const NumberRule tiles_per_cycle{true, false, std::pair{0.0, double(1 << 20)}};
  PlanMoeRequest r;
  // In the order of the CLI's options, whose checks run in that order.
  r.platform = a.existing_file("platform");
  r.producers = a.integer("producers", in_range(double(ranges::kProducers.lo), double(ranges::kProducers.hi))).value_or(0);
  r.kernel = a.text("kernel");
  r.shape = a.text("shape");
  r.hidden = a.integer("hidden", integers(ranges::kGemmDim));
  r.h_inter = a.integer("h_inter", integers(ranges::kGemmDim));
  r.experts = a.integer("experts", integers(ranges::kExperts));
  r.top_k = a.integer("top_k", integers(ranges::kExperts));
  r.precision = a.text("precision");
  r.sm_tflops = a.number("sm_tflops", in_range(0.01, 1000));
  r.t_l1_us = a.number("t_l1_us", positive_duration);
  r.t_l2_us = a.number("t_l2_us", positive_duration);
  r.block_m = a.integer("block_m", integers(ranges::kTileEdge));
  r.block_n = a.integer("block_n", integers(ranges::kTileEdge));
  r.out_bytes = a.integer("out_bytes", integers(ranges::kElementBytes));
  r.staging_us = a.number("staging_us", duration);
  r.tile_bytes = a.number("tile_bytes", in_range(ranges::kBytes.lo, ranges::kBytes.hi));
  r.n1 = a.number("n1", tiles_per_cycle);
  r.n2 = a.number("n2", tiles_per_cycle);
  r.simulate = a.flag("simulate");
  r.ranks = a.integer("ranks", integers(ranges::kRanks));
  r.tokens = a.long_integer("tokens", {true, false, std::nullopt});
  r.routing = a.text("routing");
  r.zipf_s = a.number("zipf_s", in_range(0.01, 100));
  r.lead_rows = a.integer("lead_rows", in_range(0, 1 << 20));
  r.experts_per_wave = a.integer("experts_per_wave", in_range(0, 1 << 20));
  r.combine = a.text("combine");
  r.cover_slots = a.integer("cover_slots", in_range(1, 16));
  a.done();
  return r;
}

void check_plan_moe(const PlanMoeRequest& r, bool flag_names) {
  using detail::arg;
  const auto name = [flag_names](const char* key) { return arg(flag_names, key); };
  const auto refuse = [](const std::string& argument, const std::string& why) { throw InputError(argument + ": " + why); };
  if (r.kernel && r.shape)
    throw InputError(name("kernel") + " and " + name("shape") + ": give one (" + name("shape") + " NAME is " +
                     name("kernel") + " NAME)");
  if (r.precision && *r.precision != "bf16" && *r.precision != "fp8")
    refuse(name("precision"), "must be bf16 or fp8, got \"" + shown_text(*r.precision) + "\"");
  if (r.combine && *r.combine != "piggyback" && *r.combine != "epilogue" && *r.combine != "epilogue_issuer")
    refuse(name("combine"), "must be piggyback, epilogue or epilogue_issuer, got \"" + shown_text(*r.combine) + "\"");
  // The ways to describe a kernel, as messages list them.
  const std::string describe = name("kernel") + ", " + name("shape") + ", or " + name("hidden") + ", " +
                               name("h_inter") + ", " + name("experts") + " and " + name("top_k");
  if (r.described()) {
    const std::string form = name(!r.kernel_name().empty() ? r.kernel_key()
                                  : r.hidden                ? "hidden"
                                  : r.experts               ? "experts"
                                                            : "top_k");
    if (r.tile_bytes)
      refuse(name("tile_bytes"), "has no effect with " + form + ": a described kernel's tile is block_m x block_n x out_bytes");
    if (r.n1) refuse(name("n1"), "has no effect with " + form + ": the tile counts follow from the dimensions");
    if (r.n2) refuse(name("n2"), "has no effect with " + form + ": the tile counts follow from the dimensions");
  } else {
    const std::pair<const char*, bool> dims_only[] = {{"precision", bool(r.precision)}, {"sm_tflops", bool(r.sm_tflops)},
                                                      {"block_m", bool(r.block_m)}, {"out_bytes", bool(r.out_bytes)}};
    for (const auto& [key, set] : dims_only)
      if (set)
        refuse(name(key), "has no effect with " + name("tile_bytes") + " (the tile-level form takes " + name("t_l1_us") +
                              " and " + name("t_l2_us") + "); describe the kernel with " + name("kernel") + ", " +
                              name("shape") + " or " + name("hidden") + ", " + name("h_inter") + ", " +
                              name("experts") + " and " + name("top_k"));
    const std::pair<const char*, bool> required[] = {{"tile_bytes", bool(r.tile_bytes)}, {"t_l1_us", bool(r.t_l1_us)},
                                                     {"t_l2_us", bool(r.t_l2_us)},       {"n1", bool(r.n1)},
                                                     {"n2", bool(r.n2)},                 {"h_inter", bool(r.h_inter)}};
    for (const auto& [key, set] : required)
      if (!set) throw InputError(name(key) + " is required without a kernel description (" + describe + ")");
    if (r.simulate)
      refuse(name("simulate"), "needs a kernel description (" + describe + "): experts and top-k set the routing; the "
                               "tile-level form (" + name("tile_bytes") + ") has none");
  }
  if (!r.simulate) {
    const std::pair<const char*, bool> simulate_only[] = {
        {"tokens", bool(r.tokens)},       {"routing", bool(r.routing)},
        {"zipf_s", bool(r.zipf_s)},       {"lead_rows", bool(r.lead_rows)},
        {"experts_per_wave", bool(r.experts_per_wave)}, {"cover_slots", bool(r.cover_slots)}};
    for (const auto& [key, set] : simulate_only)
      if (set) refuse(name(key), "has no effect without " + name("simulate") + " (it describes the simulated launch)");
  }
}

model::MoeKernel plan_moe_kernel(const PlanMoeRequest& r, bool flag_names) {
  using detail::arg;
  const auto name = [flag_names](const char* key) { return arg(flag_names, key); };
  model::KernelSource src = !r.kernel_name().empty()
                                ? model::kernel_source(r.kernel_name(), name(r.kernel_key()))
                                : model::KernelSource{{{"schema", model::kKernelSchema}, {"kind", "moe"}, {"name", "custom"}},
                                                      "plan moe", ""};
  const nlohmann::json fields = r.fields();
  if (!src.json.is_object()) return model::moe_kernel_from_json(src.json, src.origin, src.base_dir);  // names the error
  for (const auto& [key, value] : fields.items()) src.json[key] = value;
  const std::string origin =
      fields.empty() ? src.origin
                     : src.origin + (flag_names ? " with flags (--x-y sets field x_y)"
                                                : " with arguments (each sets the field of its name)");
  // An argument's routing file is relative to the working folder, a description's to its file.
  model::MoeKernel k = model::moe_kernel_from_json(src.json, origin, r.routing ? "" : src.base_dir);
  if (r.precision && k.mainloops_given())
    throw InputError(name("precision") + ": has no effect: t_l1_us and t_l2_us (" + name("t_l1_us") + "/" +
                     name("t_l2_us") + " or the description) give both mainloops");
  // precision only picks the platform's per-SM rate; a given rate replaces that pick.
  if (r.precision && k.sm_tflops > 0)
    throw InputError(name("precision") + ": has no effect with sm_tflops (" + name("sm_tflops") +
                     " or the description): the given per-SM rate estimates every mainloop not given");
  // A routing file holds its own tokens; the simulation reads them, not tokens.
  if (r.tokens && k.routing != "balanced" && k.routing != "skewed")
    throw InputError(name("tokens") + ": has no effect with a routing file (" + name("routing") +
                     " or the description's routing \"" + one_line(k.routing, 200) + "\"): the file's tokens are simulated");
  return k;
}

namespace {

// The tile-level form's audit input (tile_bytes, n1, n2, the mainloops; check_plan_moe has required them).
model::MoeInput tile_level_input(const PlanMoeRequest& r, int producers) {
  model::MoeInput in;
  in.tile_bytes = *r.tile_bytes;
  in.active_producers = producers;
  in.t_l1_mma_s = units::us_to_s(*r.t_l1_us);
  in.t_l2_mma_s = units::us_to_s(*r.t_l2_us);
  in.n1 = *r.n1;
  in.n2 = *r.n2;
  in.block_n = r.block_n.value_or(model::MoeKernel{}.block_n);
  in.sm_count = producers;
  in.h_inter = *r.h_inter;
  in.staging_s = units::us_to_s(r.staging_us.value_or(0.0));
  return in;
}

}  // namespace

PlanMoeResult plan_moe_inputs(const PlanMoeRequest& r, bool flag_names) {
  PlanMoeResult out;
  out.platform = model::load_platform_or_default(r.platform);
  out.producers = plan_producers(r.producers, detail::arg(flag_names, "producers"), r.platform, out.platform);
  if (r.described()) {
    out.kernel = plan_moe_kernel(r, flag_names);
    out.described = moe_plan_input(out.platform, *out.kernel, out.producers);
    out.datasheet_rate = out.described->estimated() && std::string_view(out.described->rate.source) == "datasheet";
  }
  out.input = out.described ? out.described->input : tile_level_input(r, out.producers);
  return out;
}

void plan_moe_audit(const PlanMoeRequest& r, PlanMoeResult& out, sim::MoeOrderTimelines* timelines) {
  const model::MoeKernel* kernel = out.kernel ? &*out.kernel : nullptr;
  const model::MoeInput& in = out.input;
  out.audit = model::audit_moe(out.platform, in);
  // As built: the description's ranks and Combine mode (the tile-level form: the arguments, else the fused kernel
  // on kPlanRanks ranks).
  out.as_built.ranks = kernel ? kernel->ranks : r.ranks.value_or(kPlanRanks);
  out.as_built.combine = kernel ? kernel->combine : r.combine.value_or("piggyback");
  nlohmann::json verdict_json = nlohmann::json::object();
  out.verdict = moe_verdict(out.platform, out.producers, in, out.audit, out.datasheet_rate, out.as_built, verdict_json);
  if (r.simulate) {
    out.simulated = simulate_moe_orders(out.platform, *kernel, *out.described, out.producers, timelines);
    // A routing file's tokens are the ones simulated, not the description's `tokens`.
    if (kernel->routing != "balanced" && kernel->routing != "skewed")
      out.simulated["tokens_per_rank"] = moe::load_routing_file(kernel->routing).tokens;
  }
  nlohmann::json& j = out.json;
  j = model::to_json(out.audit);
  j.update(verdict_json);
  if (r.simulate) j["simulated"] = out.simulated;
  stamp_output(j, "xstage.plan.moe/1", r.platform, out.platform);
  j["input"] = {{"tile_bytes", in.tile_bytes}, {"active_producers", in.active_producers},
                {"t_l1_mma_us", units::s_to_us(in.t_l1_mma_s)}, {"t_l2_mma_us", units::s_to_us(in.t_l2_mma_s)},
                {"n1", in.n1}, {"n2", in.n2}, {"block_n", in.block_n}, {"sm_count", in.sm_count},
                {"h_inter", in.h_inter}, {"staging_us", units::s_to_us(in.staging_s)}};
  if (kernel) {
    const MoePlanInput& pin = *out.described;
    j["kernel"] = model::to_json(*kernel);
    j["input"]["precision"] = kernel->precision;
    j["input"]["sm_tflops"] = pin.rate.flop_per_s_per_sm / 1e12;
    j["input"]["sm_tflops_source"] = pin.rate.source;
    j["input"]["t_l1_mma_source"] = pin.t_l1_source;
    j["input"]["t_l2_mma_source"] = pin.t_l2_source;
  }
}

PlanMoeResult plan_moe(const PlanMoeRequest& r, bool flag_names) {
  check_plan_moe(r, flag_names);
  PlanMoeResult out = plan_moe_inputs(r, flag_names);
  plan_moe_audit(r, out);
  return out;
}

}  // namespace xstage::planner
