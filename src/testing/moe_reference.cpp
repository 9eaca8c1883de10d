#include "xstage/testing/moe_reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "xstage/model/error.hpp"
#include "xstage/moe/moe_numerics.hpp"

namespace xstage::moe {

void quantize_activation_fp8(const float* x, int n, std::uint8_t* q, float* scales, int group) {
  for (int g = 0; g < fp8_groups(n, group); ++g) {
    const int c0 = g * group, c1 = std::min(n, c0 + group);
    float amax = 0.f;
    for (int c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(x[c]));
    const float s = fp8_scale_for_amax(amax);
    scales[g] = s;
    for (int c = c0; c < c1; ++c) q[c] = fp8_quantize(x[c], s);
  }
}

void dequantize_activation_fp8(const std::uint8_t* q, const float* scales, int n, float* x, int group) {
  for (int c = 0; c < n; ++c) x[c] = fp8_dequantize(q[c], scales[c / group]);
}

void quantize_weight_fp8(const float* w, int rows, int cols, std::uint8_t* q, float* scales) {
  const int gr = fp8_groups(rows), gc = fp8_groups(cols);
  for (int bi = 0; bi < gr; ++bi) {
    for (int bj = 0; bj < gc; ++bj) {
      const int r0 = bi * kFp8GroupSize, r1 = std::min(rows, r0 + kFp8GroupSize);
      const int c0 = bj * kFp8GroupSize, c1 = std::min(cols, c0 + kFp8GroupSize);
      float amax = 0.f;
      for (int r = r0; r < r1; ++r)
        for (int c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(w[size_t(r) * cols + c]));
      const float s = fp8_scale_for_amax(amax);
      scales[size_t(bi) * gc + bj] = s;
      for (int r = r0; r < r1; ++r)
        for (int c = c0; c < c1; ++c) q[size_t(r) * cols + c] = fp8_quantize(w[size_t(r) * cols + c], s);
    }
  }
}

void dequantize_weight_fp8(const std::uint8_t* q, const float* scales, int rows, int cols, float* w) {
  const int gc = fp8_groups(cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      w[size_t(r) * cols + c] =
          fp8_dequantize(q[size_t(r) * cols + c], scales[size_t(r / kFp8GroupSize) * gc + c / kFp8GroupSize]);
}

namespace {

// col_norms (FP8): also the column norms of the dequantized matrix (the Linear-2 weights' flip allowance).
PreparedLinear prepare_linear(const float* w, int rows, int cols, MoePrecision p, bool col_norms = false) {
  PreparedLinear l;
  l.rows = rows;
  l.cols = cols;
  l.w.resize(size_t(rows) * cols);
  for (size_t i = 0; i < l.w.size(); ++i) l.w[i] = round_bf16(w[i]);  // the layer's weights are bf16
  if (p == MoePrecision::kBf16) return l;
  // FP8: the bf16 weights quantized (as the layers do on the device), then held decoded.
  std::vector<std::uint8_t> q(l.w.size());
  l.block_scale.resize(size_t(fp8_groups(rows)) * fp8_groups(cols));
  quantize_weight_fp8(l.w.data(), rows, cols, q.data(), l.block_scale.data());
  for (size_t i = 0; i < q.size(); ++i) l.w[i] = e4m3_to_float(q[i]);
  if (!col_norms) return l;
  std::vector<double> col2(cols, 0.0);
  const int wgroups = fp8_groups(cols);
  for (int n = 0; n < rows; ++n)
    for (int c = 0; c < cols; ++c) {
      const double s = l.block_scale[size_t(n / kFp8GroupSize) * wgroups + c / kFp8GroupSize];
      const double w = double(l.w[size_t(n) * cols + c]) * s;
      col2[c] += w * w;
    }
  l.col_norm.resize(cols);
  for (int c = 0; c < cols; ++c) l.col_norm[c] = float(std::sqrt(col2[c]));
  return l;
}

// What the FP8 check (moe_reference_layer_fp8) asks of one expert: a relative perturbation of the
// Linear-1 outputs before their bf16 rounding (deterministic from `seed`; 0: none), and the effect of
// one e4m3 step on the Linear-2 input value where it moves the output most.
struct ExpertExtra {
  double l1_jitter = 0.0;
  std::uint64_t seed = 0;
  double flip = 0.0;  // out: max_c step(a_c)·‖W2[:, c]‖
};

// A value in [-1, 1) from (seed, i) (splitmix64).
double jitter_unit(std::uint64_t seed, std::uint64_t i) {
  std::uint64_t z = seed + 0x9e3779b97f4a7c15ull * (i + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return double(z >> 11) * 0x1.0p-52 - 1.0;
}

// The larger distance from e4m3 code q to its neighbours (in code units: decode without the scale);
// the largest finite magnitude has only the one below.
double e4m3_step(std::uint8_t q) {
  const std::uint8_t mag = q & 0x7f;
  const double v = e4m3_to_float(mag);
  double step = 0.0;
  if (mag > 0) step = v - e4m3_to_float(std::uint8_t(mag - 1));
  if (mag < 0x7e) step = std::max(step, double(e4m3_to_float(std::uint8_t(mag + 1))) - v);
  return step;
}

// out[n] = bf16(Σ_c in[c]·W[n][c]). bf16: plain dot product (accumulated in double, a higher-precision
// stand-in for the tensor cores' FP32). FP8: the input is quantized per in_group channels and each
// in_group-deep partial sum is promoted and scaled by s_in[g]·s_w[n/128][c/128]. jitter > 0 multiplies
// each output by 1 + jitter·u (u in [-1, 1) from seed, n) before its rounding; flip (FP8, not null)
// receives max_c step(q_c)·s_in[c]·‖column c of the dequantized W‖.
void linear(const PreparedLinear& l, MoePrecision p, const float* in, float* out, int in_group, double jitter = 0.0,
            std::uint64_t seed = 0, double* flip = nullptr) {
  auto round_out = [&](int n, double acc) {
    if (jitter > 0.0) acc *= 1.0 + jitter * jitter_unit(seed, std::uint64_t(n));
    out[n] = round_bf16(float(acc));
  };
  if (p == MoePrecision::kBf16) {
    for (int n = 0; n < l.rows; ++n) {
      const float* row = &l.w[size_t(n) * l.cols];
      double acc = 0;
      for (int c = 0; c < l.cols; ++c) acc += double(in[c]) * row[c];
      round_out(n, acc);
    }
    return;
  }
  const int groups = fp8_groups(l.cols, in_group), wgroups = fp8_groups(l.cols);
  std::vector<std::uint8_t> q(l.cols);
  std::vector<float> s_in(groups), qf(l.cols);
  quantize_activation_fp8(in, l.cols, q.data(), s_in.data(), in_group);
  for (int c = 0; c < l.cols; ++c) qf[c] = e4m3_to_float(q[c]);
  for (int n = 0; n < l.rows; ++n) {
    const float* row = &l.w[size_t(n) * l.cols];
    const float* s_w = &l.block_scale[size_t(n / kFp8GroupSize) * wgroups];
    double acc = 0;
    for (int g = 0; g < groups; ++g) {
      const int c0 = g * in_group, c1 = std::min(l.cols, c0 + in_group);
      double part = 0;
      for (int c = c0; c < c1; ++c) part += double(qf[c]) * row[c];
      acc += part * (double(s_in[g]) * s_w[c0 / kFp8GroupSize]);
    }
    round_out(n, acc);
  }
  if (flip != nullptr) {
    double f = 0.0;
    for (int c = 0; c < l.cols; ++c) f = std::max(f, e4m3_step(q[c]) * s_in[c / in_group] * double(l.col_norm[c]));
    *flip = f;
  }
}

}  // namespace

PreparedExpert prepare_expert(const float* w1, const float* w2, int hidden, int h_inter, MoePrecision p) {
  return PreparedExpert{prepare_linear(w1, 2 * h_inter, hidden, p),
                        prepare_linear(w2, hidden, h_inter, p, /*col_norms=*/true)};
}

namespace {

void expert_output(const MoeDims& d, MoePrecision p, const PreparedExpert& e, const float* x_row, float* out_row,
                   int l2_group, ExpertExtra* extra) {
  if (l2_group <= 0 || kFp8GroupSize % l2_group != 0) {
    throw InputError("l2_group: must divide " + std::to_string(kFp8GroupSize) + ", got " + std::to_string(l2_group));
  }
  std::vector<float> h(2 * size_t(d.h_inter)), a(d.h_inter);
  linear(e.w1, p, x_row, h.data(), kFp8GroupSize, extra ? extra->l1_jitter : 0.0, extra ? extra->seed : 0);
  for (int i = 0; i < d.h_inter; ++i) a[i] = swiglu_bf16(h[i], h[d.h_inter + i]);
  linear(e.w2, p, a.data(), out_row, l2_group, 0.0, 0,
         extra != nullptr && p == MoePrecision::kFp8 ? &extra->flip : nullptr);
}

}  // namespace

void moe_reference_expert(const MoeDims& d, MoePrecision p, const PreparedExpert& e, const float* x_row, float* out_row,
                          int l2_group, double* flip) {
  ExpertExtra extra;
  expert_output(d, p, e, x_row, out_row, l2_group, flip != nullptr ? &extra : nullptr);
  if (flip != nullptr) *flip = extra.flip;
}

void moe_reference_combine(int hidden, int top_k, const float* const* expert_out, const float* weights, float* y_row) {
  for (int c = 0; c < hidden; ++c) {
    // Float accumulation in routing order: the order the combine kernel uses.
    float acc = 0.f;
    for (int j = 0; j < top_k; ++j) acc += weights[j] * expert_out[j][c];
    y_row[c] = round_bf16(acc);
  }
}

namespace {

// One token's output; with flip_bound: Σ_j weights[j]·(the expert's ExpertExtra::flip) (FP8).
void token_output(const MoeDims& d, MoePrecision p, const float* x_row, const int* expert_ids, const float* weights,
                  const std::function<const PreparedExpert&(int)>& expert, float* y_row, int l2_group, double l1_jitter,
                  std::uint64_t seed, double* flip_bound) {
  std::vector<float> xin(d.hidden), o(size_t(d.top_k) * d.hidden);
  std::vector<const float*> rows(d.top_k);
  for (int c = 0; c < d.hidden; ++c) xin[c] = round_bf16(x_row[c]);  // the layer's input is bf16
  double bound = 0.0;
  for (int j = 0; j < d.top_k; ++j) {
    rows[j] = &o[size_t(j) * d.hidden];
    ExpertExtra extra{l1_jitter, seed * 64 + std::uint64_t(j)};
    expert_output(d, p, expert(expert_ids[j]), xin.data(), &o[size_t(j) * d.hidden], l2_group,
                  flip_bound != nullptr || l1_jitter > 0.0 ? &extra : nullptr);
    bound += std::fabs(double(weights[j])) * extra.flip;
  }
  moe_reference_combine(d.hidden, d.top_k, rows.data(), weights, y_row);
  if (flip_bound != nullptr) *flip_bound = bound;
}

std::vector<float> layer_output(const MoeDims& d, MoePrecision p, const std::vector<float>& x,
                                const std::vector<Routing>& routing, const std::vector<float>& w1,
                                const std::vector<float>& w2, int l2_group, double l1_jitter, std::uint64_t seed,
                                std::vector<float>* flip_bounds) {
  validate_dims(d);
  const size_t w1_per = size_t(2) * d.h_inter * d.hidden, w2_per = size_t(d.hidden) * d.h_inter;
  if (x.size() != size_t(d.ranks) * d.tokens * d.hidden) throw InputError("x: wrong size " + std::to_string(x.size()));
  if (w1.size() != w1_per * d.experts) throw InputError("w1: wrong size " + std::to_string(w1.size()));
  if (w2.size() != w2_per * d.experts) throw InputError("w2: wrong size " + std::to_string(w2.size()));
  if (routing.size() != size_t(d.ranks)) throw InputError("routing: need one per rank, got " + std::to_string(routing.size()));
  if (!(l1_jitter >= 0.0)) throw InputError("l1_jitter: must be >= 0, got " + std::to_string(l1_jitter));
  for (const Routing& r : routing) {
    validate_routing(r, "routing");
    if (r.tokens != d.tokens || r.experts != d.experts || r.top_k != d.top_k) {
      throw InputError("routing: shape (" + std::to_string(r.tokens) + ", " + std::to_string(r.experts) + ", " +
                       std::to_string(r.top_k) + ") does not match the layer");
    }
  }
  // Prepare each expert once, on first use (experts with no tokens are never touched).
  std::map<int, PreparedExpert> prepared;
  auto expert = [&](int e) -> const PreparedExpert& {
    auto it = prepared.find(e);
    if (it == prepared.end())
      it = prepared.emplace(e, prepare_expert(&w1[w1_per * e], &w2[w2_per * e], d.hidden, d.h_inter, p)).first;
    return it->second;
  };
  std::vector<float> y(x.size());
  if (flip_bounds != nullptr) flip_bounds->assign(size_t(d.ranks) * d.tokens, 0.f);
  for (int r = 0; r < d.ranks; ++r) {
    for (int t = 0; t < d.tokens; ++t) {
      const size_t token = size_t(r) * d.tokens + t, row = token * d.hidden;
      double bound = 0.0;
      token_output(d, p, &x[row], &routing[r].expert_ids[size_t(t) * d.top_k], &routing[r].weights[size_t(t) * d.top_k],
                   expert, &y[row], l2_group, l1_jitter, seed * 0x100000001b3ull + token,
                   flip_bounds != nullptr ? &bound : nullptr);
      if (flip_bounds != nullptr) (*flip_bounds)[token] = float(bound);
    }
  }
  return y;
}

}  // namespace

void moe_reference_token(const MoeDims& d, MoePrecision p, const float* x_row, const int* expert_ids,
                         const float* weights, const std::function<const PreparedExpert&(int)>& expert,
                         float* y_row, int l2_group) {
  token_output(d, p, x_row, expert_ids, weights, expert, y_row, l2_group, 0.0, 0, nullptr);
}

std::vector<float> moe_reference_layer(const MoeDims& d, MoePrecision p, const std::vector<float>& x,
                                       const std::vector<Routing>& routing, const std::vector<float>& w1,
                                       const std::vector<float>& w2, int l2_group) {
  return layer_output(d, p, x, routing, w1, w2, l2_group, 0.0, 0, nullptr);
}

MoeFp8Reference moe_reference_layer_fp8(const MoeDims& d, const std::vector<float>& x,
                                        const std::vector<Routing>& routing, const std::vector<float>& w1,
                                        const std::vector<float>& w2, int l2_group, double l1_jitter,
                                        std::uint64_t jitter_seed) {
  MoeFp8Reference out;
  out.y = layer_output(d, MoePrecision::kFp8, x, routing, w1, w2, l2_group, l1_jitter, jitter_seed, &out.flip_bound);
  return out;
}

MoeFlipCheck check_within_flips(const float* got, const MoeFp8Reference& ref, int hidden, double flips,
                                double rel) {
  if (hidden <= 0 || ref.y.size() != ref.flip_bound.size() * size_t(hidden))
    throw InputError("check_within_flips: reference of " + std::to_string(ref.flip_bound.size()) +
                     " tokens does not hold " + std::to_string(ref.y.size()) + " values of hidden " +
                     std::to_string(hidden));
  MoeFlipCheck c;
  std::vector<double> rel_errors;
  for (size_t t = 0; t < ref.flip_bound.size(); ++t) {
    double err = 0.0, norm = 0.0;
    bool finite = true;
    for (int i = 0; i < hidden; ++i) {
      const double g = got[t * hidden + i], r = ref.y[t * hidden + i];
      finite = finite && std::isfinite(g);
      err += (g - r) * (g - r);
      norm += r * r;
    }
    const double allowed = flips * ref.flip_bound[t] + rel * std::sqrt(norm) + 1e-30;
    const double ratio = finite ? std::sqrt(err) / allowed : std::numeric_limits<double>::infinity();
    rel_errors.push_back(finite ? std::sqrt(err / std::max(norm, 1e-60)) : std::numeric_limits<double>::infinity());
    if (!(ratio <= 1.0)) ++c.tokens_over;
    if (!(ratio <= c.worst_ratio)) {
      c.worst_ratio = ratio;
      c.worst_token = int(t);
    }
  }
  if (!rel_errors.empty()) {
    std::sort(rel_errors.begin(), rel_errors.end());
    c.median_rel_error = rel_errors[(rel_errors.size() - 1) / 2];
    c.p75_rel_error = rel_errors[(rel_errors.size() - 1) * 3 / 4];
  }
  return c;
}

double relative_l2_error(const float* got, const float* ref, std::size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
    const double e = double(got[i]) - ref[i];
    num += e * e;
    den += double(ref[i]) * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

}  // namespace xstage::moe
