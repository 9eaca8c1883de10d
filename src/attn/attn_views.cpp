// [B, S, H, D] views (DLPack / PyTorch sizes and strides) to the forward kernel's problem.
#include <cstdint>
#include <limits>
#include <string>

#include "xstage/attn/forward.hpp"

namespace xstage::attn {

namespace {

const char* const kDimName[4] = {"batch", "seq", "heads", "head_dim"};

// A size-1 dimension is only ever indexed at 0, so its stride is free: give it the stride a
// contiguous tensor would have (a positive multiple of 8 whenever the inner strides are).
int64_t effective_stride(const BshdView& v, int d) {
  if (v.size[d] != 1) return v.stride[d];
  if (d == 3) return 1;
  return v.size[d + 1] * effective_stride(v, d + 1);
}

std::string dim_text(const char* name, int d, int64_t value) {
  return std::string(name) + " " + kDimName[d] + " (dimension " + std::to_string(d) + ") " + std::to_string(value);
}

}  // namespace

std::string attn_view_can_implement(const char* name, const BshdView& v) {
  if (effective_stride(v, 3) != 1) {
    return std::string(name) + " stride[3] " + std::to_string(v.stride[3]) +
           " (the head dimension must be contiguous: stride 1)";
  }
  for (int d = 0; d < 3; ++d) {
    const int64_t s = effective_stride(v, d);
    if (s <= 0 || s % 8 != 0) {
      return std::string(name) + " stride[" + std::to_string(d) + "] " + std::to_string(s) +
             " (strides of batch, seq and heads must be positive multiples of 8 elements)";
    }
  }
  if (reinterpret_cast<uintptr_t>(v.data) % 16 != 0) {
    return std::string(name) + " data pointer not 16-byte aligned";
  }
  return {};
}

std::string attn_forward_args_from_views(const BshdView& q, const BshdView& k, const BshdView& v, const BshdView& o,
                                         float* lse, float softmax_scale, AttnForwardArgs* args) {
  constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
  for (const auto& [name, t] : {std::pair{"q", &q}, {"k", &k}, {"v", &v}, {"out", &o}}) {
    for (int d = 0; d < 4; ++d) {
      if (t->size[d] < 1 || t->size[d] > kMaxInt) return dim_text(name, d, t->size[d]) + " (need 1 to 2^31-1)";
    }
  }
  for (int d : {0, 2, 3}) {
    if (k.size[d] != q.size[d]) return dim_text("k", d, k.size[d]) + " differs from q's " + std::to_string(q.size[d]);
    if (v.size[d] != q.size[d]) return dim_text("v", d, v.size[d]) + " differs from q's " + std::to_string(q.size[d]);
  }
  if (v.size[1] != k.size[1]) return dim_text("v", 1, v.size[1]) + " differs from k's " + std::to_string(k.size[1]);
  for (int d = 0; d < 4; ++d) {
    if (o.size[d] != q.size[d]) return dim_text("out", d, o.size[d]) + " differs from q's " + std::to_string(q.size[d]);
  }
  AttnForwardProblem& p = args->problem;
  p.batch = int(q.size[0]);
  p.seq_q = int(q.size[1]);
  p.seq_k = int(k.size[1]);
  p.heads = int(q.size[2]);
  p.head_dim = int(q.size[3]);
  p.q_stride_batch = effective_stride(q, 0);
  p.q_stride_seq = effective_stride(q, 1);
  p.q_stride_head = effective_stride(q, 2);
  p.k_stride_batch = effective_stride(k, 0);
  p.k_stride_seq = effective_stride(k, 1);
  p.k_stride_head = effective_stride(k, 2);
  p.v_stride_batch = effective_stride(v, 0);
  p.v_stride_seq = effective_stride(v, 1);
  p.v_stride_head = effective_stride(v, 2);
  p.o_stride_batch = effective_stride(o, 0);
  p.o_stride_seq = effective_stride(o, 1);
  p.o_stride_head = effective_stride(o, 2);
  p.softmax_scale = softmax_scale;
  args->q = q.data;
  args->k = k.data;
  args->v = v.data;
  args->o = const_cast<void*>(o.data);
  args->lse = lse;
  return {};
}

}  // namespace xstage::attn
