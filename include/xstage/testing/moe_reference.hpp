// CPU reference of the expert-parallel MoE layer (small shapes): the function the GPU baseline and the
// fused kernel are checked against.
//
// Layer: N ranks, each with T tokens x[r][t][h] (bf16 values held as float) and its own routing (top-k
// experts and weights per token, from xstage::moe::Routing). E experts, E/N per rank (expert e lives on
// rank e / (E/N)). Expert weights W1[e][2·h_inter][h] (rows 0..h_inter-1: gate, then up) and
// W2[e][h][h_inter]. Per token:
//   y = Σ_k w_k · W2_e·(silu(W1_gate_e·x) ⊙ W1_up_e·x),  e = expert k of the token
// rounded as the GPU path rounds: GEMM outputs (gate, up, expert output) to bf16, the SwiGLU product to
// bf16, the top-k weighted sum in float (k in routing order) and the result to bf16.
// FP8 (W8A8, DeepSeek style): activations entering each GEMM quantized to e4m3 with one scale per token
// per 128 channels, weights with one scale per 128×128 block; each partial product over one activation
// group is promoted to FP32 and scaled (see moe_numerics.hpp for the scale and rounding rules). The
// Linear-2 input (the SwiGLU output) may use a finer group (l2_group, a divisor of 128); both GPU paths
// use 128 (the fused kernel's CTA pairs exchange their 64-channel halves' maxima).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "xstage/moe/moe_dims.hpp"
#include "xstage/moe/moe_numerics.hpp"
#include "xstage/moe/routing.hpp"

namespace xstage::moe {

// --- FP8 quantization (host loops over the rules of moe_numerics.hpp) -----------------------------
// One row of n activations: q[n] e4m3 bits, scales[fp8_groups(n, group)] (group: 128, or 64).
void quantize_activation_fp8(const float* x, int n, std::uint8_t* q, float* scales, int group = kFp8GroupSize);
void dequantize_activation_fp8(const std::uint8_t* q, const float* scales, int n, float* x,
                               int group = kFp8GroupSize);
// A rows×cols weight matrix (row-major): q[rows·cols], scales[fp8_groups(rows)][fp8_groups(cols)].
void quantize_weight_fp8(const float* w, int rows, int cols, std::uint8_t* q, float* scales);
void dequantize_weight_fp8(const std::uint8_t* q, const float* scales, int rows, int cols, float* w);

// One expert's weights, prepared once for the reference: bf16 values as float, or for FP8 the decoded
// e4m3 values (unscaled) and their block scales.
struct PreparedLinear {
  int rows = 0, cols = 0;
  std::vector<float> w;            // [rows][cols]
  std::vector<float> block_scale;  // FP8 only: [groups(rows)][groups(cols)]
  std::vector<float> col_norm;     // FP8 Linear-2 only: [cols], ‖column c of the dequantized matrix‖
};
struct PreparedExpert {
  PreparedLinear w1;  // [2·h_inter][hidden]
  PreparedLinear w2;  // [hidden][h_inter]
};
PreparedExpert prepare_expert(const float* w1, const float* w2, int hidden, int h_inter, MoePrecision p);

// One expert's output row for one token (bf16 values): out_row[hidden] = W2·swiglu(W1·x_row), with the
// GPU path's roundings; x_row must already hold bf16 values. l2_group: FP8 activation group of the
// Linear-2 input (a divisor of 128). flip (FP8, when given): max_c step(a_c)·‖W2[:, c]‖, the effect of
// one e4m3 step of the Linear-2 input value that moves the row most (see moe_reference_layer_fp8).
void moe_reference_expert(const MoeDims& d, MoePrecision p, const PreparedExpert& e, const float* x_row, float* out_row,
                          int l2_group = kFp8GroupSize, double* flip = nullptr);
// The combine rule: y_row = bf16(Σ_j weights[j]·expert_out[j]), j = 0..top_k-1 in order, float sums.
void moe_reference_combine(int hidden, int top_k, const float* const* expert_out, const float* weights, float* y_row);

// Output row of one token: x_row[hidden] -> y_row[hidden]. `expert(e)` returns the prepared weights of
// global expert e (called only for the token's experts).
void moe_reference_token(const MoeDims& d, MoePrecision p, const float* x_row, const int* expert_ids,
                         const float* weights, const std::function<const PreparedExpert&(int)>& expert,
                         float* y_row, int l2_group = kFp8GroupSize);

// The whole layer. x: [ranks][tokens][hidden]; routing: one per rank (tokens × top_k over `experts`);
// w1: [experts][2·h_inter][hidden]; w2: [experts][hidden][h_inter]. Returns y [ranks][tokens][hidden].
std::vector<float> moe_reference_layer(const MoeDims& d, MoePrecision p, const std::vector<float>& x,
                                       const std::vector<Routing>& routing, const std::vector<float>& w1,
                                       const std::vector<float>& w2, int l2_group = kFp8GroupSize);

// The FP8 layer's reference and what a check needs to allow for rounding that differs from it. The
// Tensor Cores do not accumulate as this reference does (in double), so some Linear-1 outputs land on the
// other side of a bf16 rounding boundary, and some of the SwiGLU values quantized for Linear-2 take the
// neighbouring e4m3 code. flip_bound[token] = Σ_k |w_k| · max_c step(a_kc)·‖W2_k[:, c]‖: one e4m3 step of
// the Linear-2 input value of each of its experts that moves the output most (step: the larger gap to a
// neighbouring code, times the value's scale; the column of the dequantized W2). l1_jitter > 0 multiplies
// each Linear-1 output by 1 + l1_jitter·u, u in [-1, 1) from jitter_seed, before its bf16 rounding: a
// stand-in for another accumulation, for testing the check on the CPU.
struct MoeFp8Reference {
  std::vector<float> y;           // as moe_reference_layer(d, kFp8, ...)
  std::vector<float> flip_bound;  // per token, rank after rank
};
MoeFp8Reference moe_reference_layer_fp8(const MoeDims& d, const std::vector<float>& x,
                                        const std::vector<Routing>& routing, const std::vector<float>& w1,
                                        const std::vector<float>& w2, int l2_group = kFp8GroupSize,
                                        double l1_jitter = 0.0, std::uint64_t jitter_seed = 0);
// Tokens of `got` whose output row differs from the reference row by more than
// flips·flip_bound + rel·‖reference row‖ (a non-finite value counts as over), the worst ratio of error to
// that allowance, and quantiles of the rows' relative errors (a flip moves few rows; a wrong rule or a
// wrong expert's scale, many).
struct MoeFlipCheck {
  int tokens_over = 0;
  double worst_ratio = 0.0;
  int worst_token = -1;
  // Over tokens, of ‖got row − reference row‖ / ‖reference row‖: the median and the 75th percentile.
  double median_rel_error = 0.0, p75_rel_error = 0.0;
};
MoeFlipCheck check_within_flips(const float* got, const MoeFp8Reference& ref, int hidden, double flips, double rel);
// The allowance with which the fused FP8 layer is checked (its GPU tests and `xstage moe bench`): 4 e4m3
// steps of each row's most sensitive values plus 1e-2 of its norm (tests/cpu/test_moe_fp8_check.cpp).
inline constexpr double kFp8CheckFlips = 4.0, kFp8CheckRel = 1e-2;
// The tests' bound on the rows' 75th percentile (1e-2) is a statement about most of many rows: it
// applies from this many tokens on (with one token it would bound that row by 1e-2, which the per-token
// allowance above deliberately relaxes).
inline constexpr int kFp8CheckP75MinRows = 8;

// Relative L2 error ‖got − ref‖ / ‖ref‖ (infinity when got holds a non-finite value).
double relative_l2_error(const float* got, const float* ref, std::size_t n);

}  // namespace xstage::moe
