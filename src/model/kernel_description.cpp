#include "xstage/model/kernel_description.hpp"

#include <array>
#include <filesystem>
#include <set>

#include "xstage/model/input_file.hpp"

namespace xstage::model {

namespace {

using json = nlohmann::json;

constexpr std::array<const char*, 27> kKeys = {
    "schema",     "kind",      "name",      "description",     "source",      "assumptions", "hidden",  "h_inter",
    "experts",    "top_k",     "ranks",     "tokens",          "precision",   "routing",     "zipf_s",  "block_m",
    "block_n",    "out_bytes", "t_l1_us",   "t_l2_us",         "mainloop_source", "sm_tflops", "combine", "staging_us",
    "cover_slots", "lead_rows", "experts_per_wave"};

const json* find(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string text_field(const json& j, const char* key, std::string_view origin, std::size_t max_bytes) {
  const json* v = find(j, key);
  if (!v) return {};
  if (!v->is_string() || v->get_ref<const std::string&>().size() > max_bytes)
    input_fail(origin, key, "must be a string of at most " + std::to_string(max_bytes) + " bytes, got " + bounded_json(*v));
  return v->get<std::string>();
}

std::string choice(const json& j, const char* key, std::string_view origin, std::initializer_list<const char*> accepted,
                   const std::string& fallback) {
  const json* v = find(j, key);
  if (!v) return fallback;
  std::string list;
  for (const char* a : accepted) list += std::string(list.empty() ? "" : " or ") + "\"" + a + "\"";
  if (v->is_string())
    for (const char* a : accepted)
      if (v->get_ref<const std::string&>() == a) return a;
  input_fail(origin, key, "must be " + list + ", got " + bounded_json(*v));
}

long long integer(const json& j, const char* key, std::string_view origin, IntRange r, long long fallback) {
  const json* v = find(j, key);
  return v ? json_integer_in(*v, origin, key, r) : fallback;
}

double real(const json& j, const char* key, std::string_view origin, const Range& r, double fallback) {
  const json* v = find(j, key);
  return v ? json_number_in(*v, origin, key, r) : fallback;
}

}  // namespace

MoeKernel moe_kernel_from_json(const json& j, std::string_view origin, const std::string& base_dir) {
  if (!j.is_object()) input_fail(origin, "(top level)", "must be a JSON object, got " + bounded_json(j));
  const std::set<std::string> known(kKeys.begin(), kKeys.end());
  for (const auto& [key, value] : j.items())
    if (!known.count(key)) input_fail(origin, key, "unknown field");
  const json* schema = find(j, "schema");
  if (!schema) input_fail(origin, "schema", "missing");
  if (!schema->is_string() || schema->get<std::string>() != kKernelSchema)
    input_fail(origin, "schema", "unknown schema " + bounded_json(*schema) + " (expected \"" + kKernelSchema + "\")");
  choice(j, "kind", origin, {"moe"}, "moe");

  MoeKernel k;
  if (const json* n = find(j, "name")) {
    const bool ok = n->is_string() && !n->get_ref<const std::string&>().empty() && n->get_ref<const std::string&>().size() <= 128;
    if (!ok) input_fail(origin, "name", "must be a string of 1..128 bytes, got " + bounded_json(*n));
    k.name = n->get<std::string>();
  }
  k.description = text_field(j, "description", origin, 4096);
  k.source = text_field(j, "source", origin, 4096);
  if (const json* a = find(j, "assumptions")) {
    if (!a->is_array() || a->size() > 64)
      input_fail(origin, "assumptions", "must be an array of at most 64 strings, got " + bounded_json(*a));
    for (std::size_t i = 0; i < a->size(); ++i) {
      const json& s = (*a)[i];
      if (!s.is_string() || s.get_ref<const std::string&>().size() > 4096)
        input_fail(origin, "assumptions[" + std::to_string(i) + "]", "must be a string of at most 4096 bytes, got " +
                                                                         bounded_json(s));
      k.assumptions.push_back(s.get<std::string>());
    }
  }
  constexpr IntRange kDim{1, 1 << 20};
  for (const char* key : {"hidden", "h_inter", "experts", "top_k"})
    if (!find(j, key)) input_fail(origin, key, "missing (a MoE description needs hidden, h_inter, experts and top_k)");
  k.hidden = static_cast<int>(integer(j, "hidden", origin, kDim, 0));
  k.h_inter = static_cast<int>(integer(j, "h_inter", origin, kDim, 0));
  k.experts = static_cast<int>(integer(j, "experts", origin, {1, 65536}, 0));
  k.top_k = static_cast<int>(integer(j, "top_k", origin, {1, k.experts}, 0));
  k.ranks = static_cast<int>(integer(j, "ranks", origin, {1, 1024}, k.ranks));
  if (k.experts % k.ranks != 0)
    input_fail(origin, "ranks", std::to_string(k.ranks) + " ranks do not divide the " + std::to_string(k.experts) +
                                    " experts (expert parallelism places experts / ranks on each)");
  k.tokens = integer(j, "tokens", origin, {1, 1LL << 31}, k.tokens);
  k.precision = choice(j, "precision", origin, {"bf16", "fp8"}, k.precision);
  if (const json* r = find(j, "routing")) {
    if (!r->is_string() || r->get_ref<const std::string&>().empty() || r->get_ref<const std::string&>().size() > 4096)
      input_fail(origin, "routing", "must be \"balanced\", \"skewed\" or a routing file's path, got " + bounded_json(*r));
    k.routing = r->get<std::string>();
    if (k.routing != "balanced" && k.routing != "skewed" && !base_dir.empty() &&
        std::filesystem::path(k.routing).is_relative())
      k.routing = (std::filesystem::path(base_dir) / k.routing).string();
  }
  k.zipf_s = real(j, "zipf_s", origin, {0.0, 10.0, true, false, ""}, k.zipf_s);
  if (find(j, "zipf_s") && k.routing != "skewed")
    input_fail(origin, "zipf_s", "applies to routing \"skewed\" only (routing is " + bounded_json(json(k.routing)) + ")");
  k.block_m = static_cast<int>(integer(j, "block_m", origin, {16, 1024}, k.block_m));
  k.block_n = static_cast<int>(integer(j, "block_n", origin, {16, 1024}, k.block_n));
  k.out_bytes = static_cast<int>(integer(j, "out_bytes", origin, {1, 8}, k.out_bytes));
  k.t_l1_us = real(j, "t_l1_us", origin, ranges::kTimeUs, 0.0);
  k.t_l2_us = real(j, "t_l2_us", origin, ranges::kTimeUs, 0.0);
  k.mainloop_source = text_field(j, "mainloop_source", origin, 4096);
  if (!k.mainloop_source.empty() && k.t_l1_us == 0 && k.t_l2_us == 0)
    input_fail(origin, "mainloop_source", "describes measured mainloops, but neither t_l1_us nor t_l2_us is given");
  k.sm_tflops = real(j, "sm_tflops", origin, {0.01, 1000.0, false, false, "TFLOP/s"}, 0.0);
  if (k.sm_tflops > 0 && k.mainloops_given())
    input_fail(origin, "sm_tflops", "has no effect: t_l1_us and t_l2_us give both mainloops");
  k.combine = choice(j, "combine", origin, {"piggyback", "epilogue", "epilogue_issuer"}, k.combine);
  k.staging_us = real(j, "staging_us", origin, ranges::kSpanUs, 0.0);
  k.cover_slots = static_cast<int>(integer(j, "cover_slots", origin, {1, 16}, k.cover_slots));
  if (find(j, "cover_slots") && k.combine != "epilogue_issuer")
    input_fail(origin, "cover_slots", "applies to combine \"epilogue_issuer\" only (combine " +
                                          bounded_json(json(k.combine)) + " has no separate epilogue issuer)");
  k.lead_rows = static_cast<int>(integer(j, "lead_rows", origin, {1, 1 << 20}, 0));
  k.experts_per_wave = static_cast<int>(integer(j, "experts_per_wave", origin, {1, 65536}, 0));
  if (k.experts_per_wave > k.experts / k.ranks)
    input_fail(origin, "experts_per_wave", std::to_string(k.experts_per_wave) + " exceeds the " +
                                               std::to_string(k.experts / k.ranks) + " local experts per rank");
  return k;
}

json to_json(const MoeKernel& k) {
  json j = {{"schema", kKernelSchema}, {"kind", "moe"}, {"name", k.name}};
  if (!k.description.empty()) j["description"] = k.description;
  if (!k.source.empty()) j["source"] = k.source;
  if (!k.assumptions.empty()) j["assumptions"] = k.assumptions;
  j.update({{"hidden", k.hidden}, {"h_inter", k.h_inter}, {"experts", k.experts}, {"top_k", k.top_k},
            {"ranks", k.ranks}, {"tokens", k.tokens}, {"precision", k.precision}, {"routing", k.routing},
            {"block_m", k.block_m}, {"block_n", k.block_n}, {"out_bytes", k.out_bytes}, {"combine", k.combine},
            {"staging_us", k.staging_us}});
  if (k.routing == "skewed") j["zipf_s"] = k.zipf_s;
  if (k.t_l1_us > 0) j["t_l1_us"] = k.t_l1_us;
  if (k.t_l2_us > 0) j["t_l2_us"] = k.t_l2_us;
  if (!k.mainloop_source.empty()) j["mainloop_source"] = k.mainloop_source;
  if (k.sm_tflops > 0) j["sm_tflops"] = k.sm_tflops;
  if (k.combine == "epilogue_issuer") j["cover_slots"] = k.cover_slots;
  if (k.lead_rows > 0) j["lead_rows"] = k.lead_rows;
  if (k.experts_per_wave > 0) j["experts_per_wave"] = k.experts_per_wave;
  return j;
}

namespace {
struct Builtin {
  std::string name, group;
  json j;
};
const std::vector<Builtin>& builtins() {
  static const std::vector<Builtin> all = [] {
    std::vector<Builtin> v;
    for (const auto& e : detail::embedded_kernels()) {
      json j = parse_json_input(e.text, e.path);
      const MoeKernel k = moe_kernel_from_json(j, e.path);  // a bad built-in is a build error caught by the tests
      v.push_back({k.name, e.group, std::move(j)});
    }
    return v;
  }();
  return all;
}
}  // namespace

const json* builtin_kernel_json(std::string_view name) {
  for (const auto& b : builtins())
    if (b.name == name) return &b.j;
  return nullptr;
}

std::vector<std::string> builtin_kernel_names() {
  std::vector<std::string> names;
  for (const auto& b : builtins()) names.push_back(b.name);
  return names;
}

std::vector<std::string> builtin_kernel_names_in(std::string_view group) {
  std::vector<std::string> names;
  for (const auto& b : builtins())
    if (b.group == group) names.push_back(b.name);
  return names;
}

KernelSource kernel_source(const std::string& name_or_path) {
  if (const json* j = builtin_kernel_json(name_or_path)) return {*j, "built-in " + name_or_path, ""};
  namespace fs = std::filesystem;
  std::error_code ec;
  if (name_or_path.find('/') == std::string::npos && name_or_path.find(".json") == std::string::npos &&
      !fs::exists(name_or_path, ec)) {
    std::string known;
    for (const auto& n : builtin_kernel_names()) known += (known.empty() ? "" : ", ") + n;
    throw InputError("--kernel: \"" + bounded_text(name_or_path, 120) + "\" is neither a built-in kernel (" + known +
                     ") nor a description file");
  }
  return {load_json_input(name_or_path, "kernel description"), name_or_path,
          fs::path(name_or_path).parent_path().string()};
}

}  // namespace xstage::model
