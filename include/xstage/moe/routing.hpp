// Token-to-expert routing for the expert-parallel MoE: generators (balanced, skewed) and a file
// format so real router traces can be replayed. Host code; the fused kernel and its baseline take
// a Routing as input, and the planner derives per-expert rows from it.
//
// File (schema "xstage.routing/1", JSON):
//   {"schema": "xstage.routing/1", "tokens": T, "experts": E, "top_k": k,
//    "expert_ids": [T·k integers, token-major], "weights": [T·k numbers, token-major]}
// Within a token the k experts are distinct; weights are finite and >= 0.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace xstage::moe {

inline constexpr std::string_view kRoutingSchema = "xstage.routing/1";
// Accepted shapes of a routing file (top_k: 1..experts).
inline constexpr int kMaxRoutingTokens = 1 << 24;
inline constexpr int kMaxRoutingExperts = 65536;

struct Routing {
  int tokens = 0;
  int experts = 0;
  int top_k = 0;
  std::vector<int> expert_ids;  // [tokens][top_k]
  std::vector<float> weights;   // [tokens][top_k]
};

// Every expert receives the same number of token slots (± 1 when tokens·top_k is not a multiple
// of experts); which experts share a token is random (seeded).
Routing balanced_routing(int tokens, int experts, int top_k, std::uint64_t seed);
// Each token draws top_k distinct experts with probability ∝ 1/(e + 1)^s (expert 0 the hottest), so
// a few experts receive most of the traffic, as persistent hot experts do.
Routing skewed_routing(int tokens, int experts, int top_k, double zipf_s, std::uint64_t seed);

std::vector<long long> tokens_per_expert(const Routing& r);

// Throws xstage::InputError naming the field and value.
void validate_routing(const Routing& r, std::string_view origin);
Routing routing_from_json(const nlohmann::json& j, std::string_view origin);
nlohmann::json routing_to_json(const Routing& r);
Routing load_routing_file(const std::string& path);

}  // namespace xstage::moe
