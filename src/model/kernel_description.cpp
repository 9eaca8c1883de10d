#include "xstage/model/kernel_description.hpp"

#include <array>
#include <filesystem>

#include "xstage/model/input_file.hpp"

namespace xstage::model {

namespace {

using json = nlohmann::json;

constexpr std::array<const char*, 27> kKeys = {
    "schema",     "kind",      "name",      "description",     "source",      "assumptions", "hidden",  "h_inter",
    "experts",    "top_k",     "ranks",     "tokens",          "precision",   "routing",     "zipf_s",  "block_m",
    "block_n",    "out_bytes", "t_l1_us",   "t_l2_us",         "mainloop_source", "sm_tflops", "combine", "staging_us",
    "cover_slots", "lead_rows", "experts_per_wave"};
constexpr std::array<const char*, 13> kBurstGapKeys = {
    "schema", "kind", "name", "description", "source", "assumptions", "producers", "issue", "chunks", "cover_slots",
    "staging_us", "repeat", "tiles"};
constexpr std::array<const char*, 6> kBurstGapTileKeys = {"name", "mainloop_us", "bytes", "remote_share", "count", "k_steps"};
constexpr const char* kKinds[] = {"moe", "burst_gap"};

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


void check_known(const json& j, std::string_view origin, std::span<const char* const> keys, const std::string& where) {
  for (const auto& [key, value] : j.items()) {
    bool ok = false;
    for (const char* k : keys) ok = ok || key == k;
    if (!ok) input_fail(origin, where + key, "unknown field");
  }
}

std::string name_field(const json& j, const char* key, std::string_view origin, const std::string& field,
                       const std::string& fallback) {
  const json* n = find(j, key);
  if (!n) return fallback;
  const bool ok = n->is_string() && !n->get_ref<const std::string&>().empty() && n->get_ref<const std::string&>().size() <= 128;
  if (!ok) input_fail(origin, field, "must be a string of 1..128 bytes, got " + bounded_json(*n));
  return n->get<std::string>();
}

// name, description, source and assumptions: the fields every kind has.
void text_fields(const json& j, std::string_view origin, std::string& name, std::string& description,
                 std::string& source, std::vector<std::string>& assumptions) {
  name = name_field(j, "name", origin, "name", name);
  description = text_field(j, "description", origin, 4096);
  source = text_field(j, "source", origin, 4096);
  if (const json* a = find(j, "assumptions")) {
    if (!a->is_array() || a->size() > 64)
      input_fail(origin, "assumptions", "must be an array of at most 64 strings, got " + bounded_json(*a));
    for (std::size_t i = 0; i < a->size(); ++i) {
      const json& s = (*a)[i];
      if (!s.is_string() || s.get_ref<const std::string&>().size() > 4096)
        input_fail(origin, "assumptions[" + std::to_string(i) + "]", "must be a string of at most 4096 bytes, got " +
                                                                         bounded_json(s));
      assumptions.push_back(s.get<std::string>());
    }
  }
}

}  // namespace

std::string kernel_kind(const json& j, std::string_view origin) {
  if (!j.is_object()) input_fail(origin, "(top level)", "must be a JSON object, got " + bounded_json(j));
  const json* schema = find(j, "schema");
  if (!schema) input_fail(origin, "schema", "missing");
  if (!schema->is_string() || schema->get<std::string>() != kKernelSchema)
    input_fail(origin, "schema", "unknown schema " + bounded_json(*schema) + " (expected \"" + kKernelSchema + "\")");
  return choice(j, "kind", origin, {kKinds[0], kKinds[1]}, kKinds[0]);
}

std::span<const char* const> moe_kernel_fields() { return kKeys; }
std::span<const char* const> burst_gap_kernel_fields() { return kBurstGapKeys; }
std::span<const char* const> burst_gap_tile_fields() { return kBurstGapTileKeys; }

MoeKernel moe_kernel_from_json(const json& j, std::string_view origin, const std::string& base_dir) {
  if (!j.is_object()) input_fail(origin, "(top level)", "must be a JSON object, got " + bounded_json(j));
  if (const json* kind = find(j, "kind"); kind && *kind == "burst_gap")
    input_fail(origin, "kind", "\"burst_gap\" describes a burst-gap kernel (xstage simulate --kernel runs it); a MoE "
                               "layer's description has kind \"moe\"");
  check_known(j, origin, kKeys, "");
  kernel_kind(j, origin);

  MoeKernel k;
  text_fields(j, origin, k.name, k.description, k.source, k.assumptions);
  for (const char* key : {"hidden", "h_inter", "experts", "top_k"})
    if (!find(j, key)) input_fail(origin, key, "missing (a MoE description needs hidden, h_inter, experts and top_k)");
  k.hidden = static_cast<int>(integer(j, "hidden", origin, ranges::kGemmDim, 0));
  k.h_inter = static_cast<int>(integer(j, "h_inter", origin, ranges::kGemmDim, 0));
  k.experts = static_cast<int>(integer(j, "experts", origin, ranges::kExperts, 0));
  k.top_k = static_cast<int>(integer(j, "top_k", origin, {1, k.experts}, 0));
  k.ranks = static_cast<int>(integer(j, "ranks", origin, ranges::kRanks, k.ranks));
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
  k.out_bytes = static_cast<int>(integer(j, "out_bytes", origin, ranges::kElementBytes, k.out_bytes));
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

long long BurstGapKernel::tiles_per_producer() const {
  long long per_repeat = 0;
  for (const auto& t : tiles) per_repeat += t.count;
  return per_repeat * repeat;
}

BurstGapKernel burst_gap_kernel_from_json(const json& j, std::string_view origin, long long max_tiles_per_producer) {
  if (kernel_kind(j, origin) != "burst_gap")
    input_fail(origin, "kind", "must be \"burst_gap\" for a burst-gap kernel, got " + bounded_json(j.value("kind", json("moe"))));
  check_known(j, origin, kBurstGapKeys, "");
  BurstGapKernel k;
  text_fields(j, origin, k.name, k.description, k.source, k.assumptions);
  k.producers = static_cast<int>(integer(j, "producers", origin, ranges::kProducers, 0));
  k.issue = choice(j, "issue", origin, {"epilogue", "piggyback", "epilogue_issuer"}, k.issue);
  k.chunks = static_cast<int>(integer(j, "chunks", origin, {1, 64}, k.chunks));
  if (find(j, "chunks") && k.issue != "piggyback")
    input_fail(origin, "chunks", "applies to issue \"piggyback\" only (issue is " + bounded_json(json(k.issue)) + ")");
  k.cover_slots = static_cast<int>(integer(j, "cover_slots", origin, {1, 16}, k.cover_slots));
  if (find(j, "cover_slots") && k.issue != "epilogue_issuer")
    input_fail(origin, "cover_slots", "applies to issue \"epilogue_issuer\" only (issue " + bounded_json(json(k.issue)) +
                                          " has no separate epilogue issuer)");
  k.staging_us = real(j, "staging_us", origin, ranges::kSpanUs, 0.0);
  k.repeat = integer(j, "repeat", origin, {1, 1'000'000}, k.repeat);
  const json* tiles = find(j, "tiles");
  if (!tiles) input_fail(origin, "tiles", "missing (a burst-gap description needs its tiles in order)");
  if (!tiles->is_array() || tiles->empty() || tiles->size() > 256)
    input_fail(origin, "tiles", "must be an array of 1..256 tile kinds, got " + bounded_json(*tiles));
  long long per_repeat = 0;
  for (std::size_t i = 0; i < tiles->size(); ++i) {
    const json& tj = (*tiles)[i];
    const std::string at = "tiles[" + std::to_string(i) + "]";
    if (!tj.is_object()) input_fail(origin, at, "must be a JSON object, got " + bounded_json(tj));
    check_known(tj, origin, kBurstGapTileKeys, at + ".");
    auto field = [&](const char* key) { return at + "." + key; };
    for (const char* key : {"mainloop_us", "bytes"})
      if (!find(tj, key)) input_fail(origin, field(key), "missing (a tile kind needs mainloop_us and bytes)");
    BurstGapTile t;
    t.name = name_field(tj, "name", origin, field("name"), "tile " + std::to_string(i));
    t.mainloop_us = json_number_in(tj["mainloop_us"], origin, field("mainloop_us"), ranges::kTimeUs);
    t.bytes = json_number_in(tj["bytes"], origin, field("bytes"), {0.0, ranges::kBytes.hi, false, false, "bytes"});
    if (const json* v = find(tj, "remote_share"))
      t.remote_share = json_number_in(*v, origin, field("remote_share"), {0.0, 1.0, false, false, ""});
    if (const json* v = find(tj, "count")) t.count = json_integer_in(*v, origin, field("count"), {1, 1'000'000});
    if (const json* v = find(tj, "k_steps")) {
      if (k.issue != "piggyback")
        input_fail(origin, field("k_steps"), "applies to issue \"piggyback\" only (issue is " + bounded_json(json(k.issue)) + ")");
      t.k_steps = static_cast<int>(json_integer_in(*v, origin, field("k_steps"), {1, 65536}));
    }
    per_repeat += t.count;
    k.tiles.push_back(std::move(t));
  }
  // Size of the work, before anything is built: every producer runs repeat × Σ count tiles.
  if (static_cast<double>(per_repeat) * static_cast<double>(k.repeat) > static_cast<double>(max_tiles_per_producer))
    input_fail(origin, "repeat", std::to_string(k.repeat) + " x " + std::to_string(per_repeat) +
                                     " tiles per producer exceeds the limit of " + std::to_string(max_tiles_per_producer));
  return k;
}

json to_json(const BurstGapKernel& k) {
  json j = {{"schema", kKernelSchema}, {"kind", "burst_gap"}, {"name", k.name}};
  if (!k.description.empty()) j["description"] = k.description;
  if (!k.source.empty()) j["source"] = k.source;
  if (!k.assumptions.empty()) j["assumptions"] = k.assumptions;
  if (k.producers > 0) j["producers"] = k.producers;
  j["issue"] = k.issue;
  if (k.issue == "piggyback") j["chunks"] = k.chunks;
  if (k.issue == "epilogue_issuer") j["cover_slots"] = k.cover_slots;
  j["staging_us"] = k.staging_us;
  j["repeat"] = k.repeat;
  j["tiles"] = json::array();
  for (const auto& t : k.tiles) {
    json tj = {{"name", t.name}, {"mainloop_us", t.mainloop_us}, {"bytes", t.bytes}, {"remote_share", t.remote_share},
               {"count", t.count}};
    if (t.k_steps > 0) tj["k_steps"] = t.k_steps;
    j["tiles"].push_back(std::move(tj));
  }
  return j;
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

KernelSource kernel_source(const std::string& name_or_path, std::string_view option) {
  if (const json* j = builtin_kernel_json(name_or_path)) return {*j, "built-in " + name_or_path, ""};
  namespace fs = std::filesystem;
  std::error_code ec;
  if (name_or_path.find('/') == std::string::npos && name_or_path.find(".json") == std::string::npos &&
      !fs::exists(name_or_path, ec)) {
    std::string known;
    for (const auto& n : builtin_kernel_names()) known += (known.empty() ? "" : ", ") + n;
    throw InputError(std::string(option) + ": \"" + bounded_text(name_or_path, 120) + "\" is neither a built-in kernel (" + known +
                     ") nor a description file");
  }
  return {load_json_input(name_or_path, "kernel description"), name_or_path,
          fs::path(name_or_path).parent_path().string()};
}

}  // namespace xstage::model
