// `moe bench`: the check of a layer's output against the CPU reference on sampled tokens.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "moe_bench_internal.hpp"

namespace xstage::testing::moe_bench {

// All outputs must be finite (they were poisoned with NaN); sampled tokens of every rank must match the
// CPU reference of the layer's precision. Each needed expert's weights come back from its GPU once and
// are prepared (FP8: quantized) once; `prepared`, when given, keeps them for the next layer checked with
// the same weights and precision (the layers of one bench are filled from one seed).
template <class Layer>
CheckResult check_against_reference(const Layer& layer, const std::vector<Routing>& routing, int per_rank,
                                    std::map<int, PreparedExpert>* prepared) {
  const MoeDims& d = layer.dims();
  CheckResult c;
  std::vector<std::vector<float>> y(d.ranks), x(d.ranks);
  std::vector<std::vector<int>> picked(d.ranks);
  for (int r = 0; r < d.ranks; ++r) {
    y[r] = layer.output(r);
    for (float v : y[r]) c.non_finite += !std::isfinite(v);
    x[r] = layer.tokens(r);
    const int n = std::min(per_rank, d.tokens);
    for (int i = 0; i < n; ++i) picked[r].push_back(int((long long)i * d.tokens / n + (d.tokens / n) / 2) % d.tokens);
  }
  // Expert outputs of every (rank, picked token, j), computed expert by expert.
  std::map<int, std::vector<std::pair<int, int>>> by_expert;  // expert -> (rank, index into picked)
  for (int r = 0; r < d.ranks; ++r)
    for (size_t i = 0; i < picked[r].size(); ++i)
      for (int j = 0; j < d.top_k; ++j) by_expert[routing[r].expert_ids[size_t(picked[r][i]) * d.top_k + j]].push_back({r, int(i)});
  std::map<std::tuple<int, int, int>, std::vector<float>> expert_out;  // (rank, i, expert) -> row
  std::map<std::tuple<int, int, int>, double> expert_flip;              // FP8: its one-step flip effect
  std::map<int, PreparedExpert> local;
  std::map<int, PreparedExpert>& cache = prepared != nullptr ? *prepared : local;
  for (auto& [e, users] : by_expert) {
    auto it = cache.find(e);
    if (it == cache.end()) {
      std::vector<float> w1, w2;
      layer.expert_weights(e, w1, w2);
      it = cache.emplace(e, prepare_expert(w1.data(), w2.data(), d.hidden, d.h_inter, precision_of(layer))).first;
    }
    const PreparedExpert& pe = it->second;
    ++c.experts_fetched;
    for (auto [r, i] : users) {
      auto& row = expert_out[{r, i, e}];
      if (!row.empty()) continue;
      row.resize(d.hidden);
      moe_reference_expert(d, precision_of(layer), pe, &x[r][size_t(picked[r][i]) * d.hidden], row.data(),
                           l2_group_of(layer), &expert_flip[{r, i, e}]);
    }
  }
  std::vector<float> got;
  MoeFp8Reference ref;  // the sampled tokens' reference rows and, FP8, their rounding allowances
  for (int r = 0; r < d.ranks; ++r) {
    for (size_t i = 0; i < picked[r].size(); ++i) {
      const int t = picked[r][i];
      std::vector<const float*> rows(d.top_k);
      double bound = 0;
      for (int j = 0; j < d.top_k; ++j) {
        const std::tuple<int, int, int> key{r, int(i), routing[r].expert_ids[size_t(t) * d.top_k + j]};
        rows[j] = expert_out[key].data();
        bound += std::fabs(double(routing[r].weights[size_t(t) * d.top_k + j])) * expert_flip[key];
      }
      std::vector<float> yr(d.hidden);
      moe_reference_combine(d.hidden, d.top_k, rows.data(), &routing[r].weights[size_t(t) * d.top_k], yr.data());
      ref.y.insert(ref.y.end(), yr.begin(), yr.end());
      ref.flip_bound.push_back(float(bound));
      got.insert(got.end(), y[r].begin() + size_t(t) * d.hidden, y[r].begin() + size_t(t + 1) * d.hidden);
      ++c.tokens_checked;
    }
  }
  c.rel_l2 = relative_l2_error(got.data(), ref.y.data(), ref.y.size());
  if (precision_of(layer) == MoePrecision::kFp8) {
    // Few tokens are sampled here, and the Tensor Cores round some values to the neighbouring code where the
    // reference does not: each sampled row within 4 e4m3 steps of its most sensitive Linear-2 input
    // values plus 1e-2 of its norm (the fused GPU tests' per-token check; tests/cpu/test_moe_fp8_check.cpp).
    const MoeFlipCheck f = check_within_flips(got.data(), ref, d.hidden, kFp8CheckFlips, kFp8CheckRel);
    c.fp8_tokens_over = f.tokens_over;
    c.fp8_worst_ratio = f.worst_ratio;
    c.passed = c.non_finite == 0 && f.tokens_over == 0;
  } else {
    c.passed = c.non_finite == 0 && c.rel_l2 < 1e-2;
  }
  return c;
}

template CheckResult check_against_reference<MoeFused>(const MoeFused&, const std::vector<Routing>&, int,
                                                       std::map<int, PreparedExpert>*);
template CheckResult check_against_reference<MoeBaseline>(const MoeBaseline&, const std::vector<Routing>&, int,
                                                          std::map<int, PreparedExpert>*);

}  // namespace xstage::testing::moe_bench
