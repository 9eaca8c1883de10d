// Shared by the GPU tests of the two MoE layers (separate-kernel baseline, fused): routings with the
// interesting shapes, fresh random inputs loaded into a layer, and the CPU reference for them.
#pragma once

#include <cmath>
#include <random>
#include <vector>

#include "xstage/testing/moe_reference.hpp"
#include "xstage/moe/moe_numerics.hpp"
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

// The inputs load_random_inputs_kept made, kept so the caller can run the reference at any precision.
struct MoeTestInputs {
  std::vector<float> x, w1, w2;
  std::vector<Routing> routing;
  std::vector<float> reference(const MoeDims& d, MoePrecision p, int l2_group = kFp8GroupSize) const {
    return moe_reference_layer(d, p, x, routing, w1, w2, l2_group);
  }
};

// Each 128-channel group of every row of a row-major [rows][cols] matrix times 2^u, u uniform in
// ±spread; block_rows 128 makes it one factor per 128×128 block (weights), 1 one per row group (tokens).
inline void spread_blocks(std::vector<float>& m, size_t rows, size_t cols, size_t block_rows, float spread,
                          std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(-spread, spread);
  const size_t gc = (cols + 127) / 128;
  std::vector<float> f(gc);
  for (size_t r = 0; r < rows; ++r) {
    if (r % block_rows == 0)
      for (auto& v : f) v = std::exp2(u(rng));
    for (size_t c = 0; c < cols; ++c) m[r * cols + c] *= f[c / 128];
  }
}

// Fresh random inputs (the distributions and routing kinds of load_random_inputs), every value already
// a bf16 value (what the layer holds: the FP8 reference quantizes the weights it is given, so unrounded
// weights would differ from the layer's by a double rounding). block_spread > 0: each 128×128 weight block and each 128-channel group of a token row
// scaled by 2^u, u uniform in ±block_spread, so FP8 scales differ from block to block and a scale
// applied to the wrong block shows.
inline MoeTestInputs make_random_inputs(const MoeDims& d, RoutingKind kind, std::mt19937_64& rng,
                                        float block_spread = 0.f) {
  const size_t n1 = size_t(2) * d.h_inter * d.hidden, n2 = size_t(d.hidden) * d.h_inter;
  MoeTestInputs in;
  in.w1 = random_vec(n1 * d.experts, rng, 0.08f);
  in.w2 = random_vec(n2 * d.experts, rng, 0.08f);
  in.x = random_vec(size_t(d.ranks) * d.tokens * d.hidden, rng, 1.f);
  if (block_spread > 0.f) {
    spread_blocks(in.w1, size_t(d.experts) * 2 * d.h_inter, d.hidden, 128, block_spread, rng);
    spread_blocks(in.w2, size_t(d.experts) * d.hidden, d.h_inter, 128, block_spread, rng);
    spread_blocks(in.x, size_t(d.ranks) * d.tokens, d.hidden, 1, block_spread, rng);
  }
  for (auto* v : {&in.w1, &in.w2, &in.x})
    for (auto& e : *v) e = round_bf16(e);
  in.routing = make_routing(d, kind, rng);
  return in;
}

// make_random_inputs, loaded into every rank of `layer`.
template <class Layer>
MoeTestInputs load_random_inputs_kept(Layer& layer, const MoeDims& d, RoutingKind kind, std::mt19937_64& rng,
                                      float block_spread = 0.f) {
  const int el = d.experts_per_rank();
  const size_t n1 = size_t(2) * d.h_inter * d.hidden, n2 = size_t(d.hidden) * d.h_inter;
  const MoeTestInputs in = make_random_inputs(d, kind, rng, block_spread);
  for (int r = 0; r < d.ranks; ++r) {
    layer.set_tokens(r, std::vector<float>(in.x.begin() + size_t(r) * d.tokens * d.hidden,
                                           in.x.begin() + size_t(r + 1) * d.tokens * d.hidden));
    layer.set_weights(r, &in.w1[n1 * r * el], &in.w2[n2 * r * el]);
    layer.set_routing(r, in.routing[r]);
  }
  return in;
}

// Fresh random tokens (±1), weights (±0.08) and a routing of `kind` loaded into every rank of `layer`;
// returns the CPU reference output of all ranks, rank after rank.
template <class Layer>
std::vector<float> load_random_inputs(Layer& layer, const MoeDims& d, RoutingKind kind, std::mt19937_64& rng) {
  return load_random_inputs_kept(layer, d, kind, rng).reference(d, MoePrecision::kBf16);
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
