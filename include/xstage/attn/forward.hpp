// Public host API of the attention forward kernel (bf16 in/out, fp32 accumulation, non-causal) over
// caller-owned device buffers and the caller's stream. The CLI, the tests and the C ABI call it.
//
// Precision. kBf16 multiplies bf16 operands. kFp8 (head_dim 128) multiplies 8-bit operands on 8-bit GMMA,
// twice the bf16 tensor rate, from the same bf16 q, k, v: a pre-pass on the same stream quantizes them
// into a caller-provided workspace (attn_forward_workspace_bytes), and its cost is part of every call.
//   Q: INT8, one scale per query row; K: its mean over the sequence subtracted per (batch, head, channel)
//   (softmax is unchanged by it; the log-sum-exp gets q . mean back), then INT8 with one scale per 128
//   keys; Q and K rows are rotated by one signed Hadamard matrix before they are rounded (q k^T is
//   unchanged; a few outlier channels no longer set a row's range); P: e4m3 with 2^8 headroom (p in
//   [0, 256]); V: e4m3, one scale per channel of a (batch, head);
//   accumulation fp32 (int32 for Q K); output bf16.
// docs/attn_fp8.md has the measured accuracy and speed and why each format and scale is what it is.
#pragma once

#include <cstddef>
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

enum class AttnPrecision : int { kBf16 = 0, kFp8 = 1 };

// "bf16" or "fp8"; nullptr for a value outside the enum.
const char* attn_precision_name(AttnPrecision precision);
// Parses "bf16" / "fp8"; false (and *precision untouched) for anything else.
bool attn_precision_from_name(const std::string& name, AttnPrecision* precision);

struct AttnForwardArgs {
  AttnForwardProblem problem;
  const void* q = nullptr;  // bf16
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;        // bf16, same element strides as given in problem
  float* lse = nullptr;     // optional [batch, heads, seq_q] fp32, natural-log log-sum-exp
  AttnPrecision precision = AttnPrecision::kBf16;
  // kFp8: device memory of attn_forward_workspace_bytes, 256-byte aligned, not used by another call on
  // another stream at the same time. kBf16: optional (nullptr: every tile whole); given (as large as
  // attn_forward_workspace_bytes(problem, kBf16), same rules), the schedule's last round is split over
  // all CTAs where that shortens the kernel (AttnTail).
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

// How a bf16 call's last round of tiles runs. kWhole: each tile on one CTA, so a row's output depends
// only on its own inputs, never on the problem's other heads or rows (the Ulysses paths, whose outputs
// equal the local attention's bit for bit, use it). kSplit: when the last round would leave most CTAs
// idle (T tiles on G CTAs, T mod G well under G), its key blocks are spread over every CTA and each
// split tile's partial results are merged by its owner (sched::AttnTileScheduler::with_split_tail):
// faster at short sequences. Split tiles are as accurate as kWhole's but not bit-identical: P is rounded
// to bf16 relative to each segment's own running max.
enum class AttnTail { kWhole, kSplit };

AttnForwardProblem make_bshd_problem(int batch, int seq_q, int seq_k, int heads, int head_dim);

// Device bytes of args.workspace: for kFp8 the 8-bit copies of q, k and V^T and their scales (required);
// kBf16: the split tail's partials on the current device (AttnTail::kSplit; 0 when its schedule keeps every
// tile whole, or for kWhole).
size_t attn_forward_workspace_bytes(const AttnForwardProblem& p, AttnPrecision precision,
                                    AttnTail tail = AttnTail::kSplit);

// Empty when the kernel can run the problem; otherwise the reason, naming the offending field.
std::string attn_forward_can_implement(const AttnForwardArgs& args);

// Launches the kernel on `stream` (persistent grid sized to the device's SMs). Returns the launch
// error, if any; the caller synchronizes.
cudaError_t attn_forward(const AttnForwardArgs& args, cudaStream_t stream);

// A [batch, seq, heads, head_dim] view of a bf16 tensor as DLPack and PyTorch describe it: sizes and
// strides in elements, outermost first.
struct BshdView {
  const void* data = nullptr;
  int64_t size[4] = {0, 0, 0, 0};
  int64_t stride[4] = {0, 0, 0, 0};
};

// Empty when the kernel reads or writes `view` in place; otherwise the reason, naming `name` and the
// offending stride. The kernel takes any view whose head-dimension stride is 1 and whose other strides
// are positive multiples of 8 elements (16 bytes, TMA) at a 16-byte-aligned address; strides of
// size-1 dimensions do not matter. A view it does not take may still be copied to a contiguous one.
std::string attn_view_can_implement(const char* name, const BshdView& view);

// Fills `args` for q [B, Sq, H, D], k and v [B, Skv, H, D], o like q and an optional lse
// [B, H, Sq] fp32 buffer (contiguous); returns empty or the first shape mismatch, naming the tensor
// and the dimension. Views are not checked here (attn_view_can_implement, then
// attn_forward_can_implement). softmax_scale 0 selects 1/sqrt(head_dim).
std::string attn_forward_args_from_views(const BshdView& q, const BshdView& k, const BshdView& v, const BshdView& o,
                                         float* lse, float softmax_scale, AttnForwardArgs* args);

// 4 * batch * heads * seq_q * seq_k * head_dim: the two matrix products of the forward pass.
double attn_forward_flops(const AttnForwardProblem& p);

}  // namespace xstage::attn
