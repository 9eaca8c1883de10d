#include "xstage/moe/routing.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "xstage/model/error.hpp"
#include "xstage/model/input_file.hpp"

namespace xstage::moe {

namespace {

[[noreturn]] void fail(std::string_view origin, const std::string& field, const std::string& what) {
  input_fail(origin, field, what);
}

void check_shape(int tokens, int experts, int top_k) {
  if (tokens <= 0) throw InputError("routing: tokens must be > 0, got " + std::to_string(tokens));
  if (experts <= 0) throw InputError("routing: experts must be > 0, got " + std::to_string(experts));
  if (top_k <= 0 || top_k > experts)
    throw InputError("routing: top_k must be in 1.." + std::to_string(experts) + ", got " + std::to_string(top_k));
}

// Router weights: softmax of random logits over the token's k experts (they sum to 1).
void fill_weights(Routing& r, std::mt19937_64& rng) {
  std::normal_distribution<float> logit(0.0f, 1.0f);
  r.weights.resize(r.expert_ids.size());
  for (int t = 0; t < r.tokens; ++t) {
    float* w = &r.weights[static_cast<std::size_t>(t) * r.top_k];
    float sum = 0.0f;
    for (int j = 0; j < r.top_k; ++j) sum += (w[j] = std::exp(logit(rng)));
    for (int j = 0; j < r.top_k; ++j) w[j] /= sum;
  }
}

}  // namespace

Routing balanced_routing(int tokens, int experts, int top_k, std::uint64_t seed) {
  check_shape(tokens, experts, top_k);
  std::mt19937_64 rng(seed);
  Routing r{tokens, experts, top_k, {}, {}};
  r.expert_ids.resize(static_cast<std::size_t>(tokens) * top_k);
  // Slot s = (token order, j) takes expert label[(s) mod E]: consecutive slots of one token are
  // distinct (k ≤ E) and counts differ by at most one; shuffling token order and labels randomises
  // which experts meet.
  std::vector<int> label(experts), order(tokens);
  std::iota(label.begin(), label.end(), 0);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(label.begin(), label.end(), rng);
  std::shuffle(order.begin(), order.end(), rng);
  for (int i = 0; i < tokens; ++i)
    for (int j = 0; j < top_k; ++j) {
      const long long slot = static_cast<long long>(i) * top_k + j;
      r.expert_ids[static_cast<std::size_t>(order[i]) * top_k + j] = label[slot % experts];
    }
  fill_weights(r, rng);
  return r;
}

Routing skewed_routing(int tokens, int experts, int top_k, double zipf_s, std::uint64_t seed) {
  check_shape(tokens, experts, top_k);
  if (!(zipf_s > 0) || !std::isfinite(zipf_s)) throw InputError("routing: zipf exponent must be > 0, got " + std::to_string(zipf_s));
  std::mt19937_64 rng(seed);
  Routing r{tokens, experts, top_k, {}, {}};
  r.expert_ids.resize(static_cast<std::size_t>(tokens) * top_k);
  std::vector<double> log_w(experts);
  for (int e = 0; e < experts; ++e) log_w[e] = -zipf_s * std::log(e + 1.0);
  // Gumbel top-k draws k distinct experts with the successive-sampling probabilities ∝ w_e.
  std::extreme_value_distribution<double> gumbel(0.0, 1.0);
  std::vector<std::pair<double, int>> keys(experts);
  for (int t = 0; t < tokens; ++t) {
    for (int e = 0; e < experts; ++e) keys[e] = {log_w[e] + gumbel(rng), e};
    std::partial_sort(keys.begin(), keys.begin() + top_k, keys.end(), std::greater<>());
    for (int j = 0; j < top_k; ++j) r.expert_ids[static_cast<std::size_t>(t) * top_k + j] = keys[j].second;
  }
  fill_weights(r, rng);
  return r;
}

std::vector<long long> tokens_per_expert(const Routing& r) {
  std::vector<long long> c(r.experts, 0);
  for (int e : r.expert_ids) ++c[e];
  return c;
}

void validate_routing(const Routing& r, std::string_view origin) {
  if (r.tokens <= 0) fail(origin, "tokens", "must be > 0, got " + std::to_string(r.tokens));
  if (r.experts <= 0) fail(origin, "experts", "must be > 0, got " + std::to_string(r.experts));
  if (r.top_k <= 0 || r.top_k > r.experts)
    fail(origin, "top_k", "must be in 1.." + std::to_string(r.experts) + ", got " + std::to_string(r.top_k));
  const std::size_t n = static_cast<std::size_t>(r.tokens) * r.top_k;
  if (r.expert_ids.size() != n)
    fail(origin, "expert_ids", "must hold tokens*top_k = " + std::to_string(n) + " entries, got " + std::to_string(r.expert_ids.size()));
  if (r.weights.size() != n)
    fail(origin, "weights", "must hold tokens*top_k = " + std::to_string(n) + " entries, got " + std::to_string(r.weights.size()));
  for (int t = 0; t < r.tokens; ++t)
    for (int j = 0; j < r.top_k; ++j) {
      const std::size_t i = static_cast<std::size_t>(t) * r.top_k + j;
      const int e = r.expert_ids[i];
      if (e < 0 || e >= r.experts)
        fail(origin, "expert_ids[" + std::to_string(i) + "]", "must be in 0.." + std::to_string(r.experts - 1) + ", got " + std::to_string(e));
      for (int jj = 0; jj < j; ++jj)
        if (r.expert_ids[i - j + jj] == e)
          fail(origin, "expert_ids[" + std::to_string(i) + "]", "expert " + std::to_string(e) + " repeated within token " + std::to_string(t));
      const float w = r.weights[i];
      if (!std::isfinite(w) || w < 0)
        fail(origin, "weights[" + std::to_string(i) + "]", "must be finite and >= 0, got " + std::to_string(w));
    }
}

Routing routing_from_json(const nlohmann::json& j, std::string_view origin) {
  if (!j.is_object()) fail(origin, "(top level)", "must be a JSON object, got " + bounded_json(j));
  auto schema = j.find("schema");
  if (schema == j.end()) fail(origin, "schema", "missing");
  if (!schema->is_string() || schema->get<std::string>() != kRoutingSchema)
    fail(origin, "schema", "unknown schema " + bounded_json(*schema) + " (expected \"" + std::string(kRoutingSchema) + "\")");
  for (const auto& [key, v] : j.items())
    if (key != "schema" && key != "tokens" && key != "experts" && key != "top_k" && key != "expert_ids" && key != "weights" &&
        key != "provenance")
      fail(origin, key, "unknown field");
  auto integer = [&](const char* key, IntRange range) {
    auto it = j.find(key);
    if (it == j.end()) fail(origin, key, "missing");
    return static_cast<int>(json_integer_in(*it, origin, key, range));
  };
  Routing r;
  r.tokens = integer("tokens", IntRange{1, kMaxRoutingTokens});
  r.experts = integer("experts", IntRange{1, kMaxRoutingExperts});
  r.top_k = integer("top_k", IntRange{1, r.experts});
  const IntRange expert_id{0, r.experts - 1};
  const Range weight{0.0, static_cast<double>(std::numeric_limits<float>::max()), false, false, ""};
  for (const char* key : {"expert_ids", "weights"}) {
    auto it = j.find(key);
    if (it == j.end()) fail(origin, key, "missing");
    if (!it->is_array()) fail(origin, key, "must be an array, got " + bounded_json(*it));
    for (std::size_t i = 0; i < it->size(); ++i) {
      const auto& v = (*it)[i];
      const std::string field = std::string(key) + "[" + std::to_string(i) + "]";
      if (std::string_view(key) == "expert_ids")
        r.expert_ids.push_back(static_cast<int>(json_integer_in(v, origin, field, expert_id)));
      else
        r.weights.push_back(static_cast<float>(json_number_in(v, origin, field, weight)));
    }
  }
  validate_routing(r, origin);
  return r;
}

nlohmann::json routing_to_json(const Routing& r) {
  return {{"schema", kRoutingSchema}, {"tokens", r.tokens},         {"experts", r.experts},
          {"top_k", r.top_k},        {"expert_ids", r.expert_ids}, {"weights", r.weights}};
}

Routing load_routing_file(const std::string& path) { return routing_from_json(load_json_input(path, "routing"), path); }

}  // namespace xstage::moe
