// Shared by the GPU tests of the two MoE layers (separate-kernel baseline, fused): routings with the
// interesting shapes, fresh random inputs loaded into a layer, and the CPU reference for them.
#pragma once

#include <cmath>
#include <random>
#include <vector>

#include "moe_reference.hpp"
#include "xstage/moe/routing.hpp"

namespace xstage::moe::test {

enum class RoutingKind { kBalanced, kSkewed, kColdExperts, kAllToRankZero };

inline std::vector<Routing> make_routing(const MoeDims& d, RoutingKind kind, std::mt19937_64& rng) {
  std::vector<Routing> out;
  for (int r = 0; r < d.ranks; ++r) {
    const std::uint64_t seed = rng();
    switch (kind) {
      case RoutingKind::kBalanced: out.push_back(balanced_routing(d.tokens, d.experts, d.top_k, seed)); break;
      case RoutingKind::kSkewed: out.push_back(skewed_routing(d.tokens, d.experts, d.top_k, 1.2, seed)); break;
      case RoutingKind::kColdExperts:
      case RoutingKind::kAllToRankZero: {
        // Tokens use only experts [0, usable): the others (and, for kAllToRankZero, every expert of the
        // ranks above 0) receive nothing.
        const int usable = kind == RoutingKind::kAllToRankZero ? d.experts_per_rank() : d.experts - 3;
        Routing x;
        x.tokens = d.tokens;
        x.experts = d.experts;
        x.top_k = d.top_k;
        std::uniform_real_distribution<float> u(0.05f, 1.f);
        for (int t = 0; t < d.tokens; ++t) {
          const int first = int(rng() % usable);
          for (int j = 0; j < d.top_k; ++j) {
            x.expert_ids.push_back((first + j) % usable);
            x.weights.push_back(u(rng));
          }
        }
        out.push_back(x);
        break;
      }
    }
  }
  return out;
}

inline std::vector<float> random_vec(size_t n, std::mt19937_64& rng, float scale) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// Fresh random tokens (±1), weights (±0.08) and a routing of `kind` loaded into every rank of `layer`;
// returns the CPU reference output of all ranks, rank after rank.
template <class Layer>
std::vector<float> load_random_inputs(Layer& layer, const MoeDims& d, RoutingKind kind, std::mt19937_64& rng) {
  const int el = d.experts_per_rank();
  const size_t n1 = size_t(2) * d.h_inter * d.hidden, n2 = size_t(d.hidden) * d.h_inter;
  const auto w1 = random_vec(n1 * d.experts, rng, 0.08f);
  const auto w2 = random_vec(n2 * d.experts, rng, 0.08f);
  const auto x = random_vec(size_t(d.ranks) * d.tokens * d.hidden, rng, 1.f);
  const auto routing = make_routing(d, kind, rng);
  for (int r = 0; r < d.ranks; ++r) {
    layer.set_tokens(r, std::vector<float>(x.begin() + size_t(r) * d.tokens * d.hidden,
                                           x.begin() + size_t(r + 1) * d.tokens * d.hidden));
    layer.set_weights(r, &w1[n1 * r * el], &w2[n2 * r * el]);
    layer.set_routing(r, routing[r]);
  }
  return moe_reference_layer(d, MoePrecision::kBf16, x, routing, w1, w2);
}

// Every rank's output, rank after rank.
template <class Layer>
std::vector<float> all_outputs(const Layer& layer, const MoeDims& d) {
  std::vector<float> got;
  for (int r = 0; r < d.ranks; ++r) {
    const auto y = layer.output(r);
    got.insert(got.end(), y.begin(), y.end());
  }
  return got;
}

inline size_t count_non_finite(const std::vector<float>& v) {
  size_t n = 0;
  for (float x : v) n += !std::isfinite(x);
  return n;
}

}  // namespace xstage::moe::test
