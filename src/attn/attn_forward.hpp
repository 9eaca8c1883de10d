// Host interface of the attention forward kernel (bf16 in/out, fp32 accumulation, non-causal).
#pragma once

#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>

namespace xstage::attn {

// Strides are in elements; the head-dimension stride must be 1. The DiT layout [batch, seq, heads, dim]
// contiguous is what make_bshd_problem builds.
struct AttnForwardProblem {
  int batch = 1;
  int seq_q = 0;
  int seq_k = 0;
  int heads = 1;
  int head_dim = 128;
  int64_t q_stride_batch = 0, q_stride_seq = 0, q_stride_head = 0;
  int64_t k_stride_batch = 0, k_stride_seq = 0, k_stride_head = 0;
  int64_t v_stride_batch = 0, v_stride_seq = 0, v_stride_head = 0;
  int64_t o_stride_batch = 0, o_stride_seq = 0, o_stride_head = 0;
  float softmax_scale = 0.f;  // 0 selects 1/sqrt(head_dim)
};

struct AttnForwardArgs {
  AttnForwardProblem problem;
  const void* q = nullptr;  // bf16
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;        // bf16, same element strides as given in problem
  float* lse = nullptr;     // optional [batch, heads, seq_q] fp32, natural-log log-sum-exp
};

AttnForwardProblem make_bshd_problem(int batch, int seq_q, int seq_k, int heads, int head_dim);

// Empty when the kernel can run the problem; otherwise the reason, naming the offending field.
std::string attn_forward_can_implement(const AttnForwardArgs& args);

// Launches the kernel on `stream` (persistent grid sized to the device's SMs). Returns the launch
// error, if any; the caller synchronizes.
cudaError_t attn_forward(const AttnForwardArgs& args, cudaStream_t stream);

// 4 * batch * heads * seq_q * seq_k * head_dim: the two matrix products of the forward pass.
double attn_forward_flops(const AttnForwardProblem& p);

}  // namespace xstage::attn
