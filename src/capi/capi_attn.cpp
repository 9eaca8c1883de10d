// C ABI of the attention forward: DLPack tensors to the public C++ API (xstage/attn/forward.hpp),
// every check before the launch, the launch on the caller's stream.
#include <cmath>
#include <cstddef>
#include <string>

#include "capi_common.hpp"
#include "xstage/sched/attn_tile_config.hpp"

#if XSTAGE_CAPI_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "capi_views.hpp"
#include "xstage/attn/forward.hpp"
#endif

namespace xstage::capi {
namespace {

constexpr const char* kBshd = "4 ([batch, seq, heads, head_dim])";
// The FP8 kernel's one head dimension and its workspace alignment, the constants attn_forward_can_implement
// checks (xstage/sched/attn_tile_config.hpp): builds without the kernel check them too.
constexpr int64_t kFp8HeadDim = sched::kAttnFp8HeadDim;
constexpr uintptr_t kWorkspaceAlign = sched::kAttnFp8WorkspaceAlign;

// The layout c_api.h states and python/xstage/_native.py's AttentionCall mirrors (LP64).
static_assert(sizeof(void*) != 8 || (offsetof(xstage_attention_call, softmax_scale) == 40 &&
                                     offsetof(xstage_attention_call, stream) == 48 &&
                                     offsetof(xstage_attention_call, precision) == 56 &&
                                     offsetof(xstage_attention_call, workspace) == 64 &&
                                     sizeof(xstage_attention_call) == 72),
              "xstage_attention_call's layout is part of the ABI");

// One call's arguments, whichever entry point it came through.
struct Call {
  const DLTensor* q = nullptr;
  const DLTensor* k = nullptr;
  const DLTensor* v = nullptr;
  const DLTensor* out = nullptr;
  const DLTensor* lse = nullptr;
  float softmax_scale = 0.f;
  int precision = XSTAGE_ATTN_PRECISION_BF16;
  const DLTensor* workspace = nullptr;
};

Call call_of(const xstage_attention_call& c) {
  return Call{c.q, c.k, c.v, c.out, c.lse, c.softmax_scale, c.precision, c.workspace};
}


// q, k (and v, out) as tensors alone: presence, device, dtype, rank, head_dim for the precision.
int check_bshd(const char* name, const DLTensor* t, int precision) {
  int status = XSTAGE_OK;
  std::string why = check_cuda_tensor(name, t, kDLBfloat, 16, 4, "bfloat16", kBshd, &status);
  if (!why.empty()) return fail(status, why);
  const int64_t d = t->shape[3];
  if (d != 64 && d != 128) {
    return fail(XSTAGE_ERR_VALUE, std::string(name) + ": head_dim (dimension 3) " + std::to_string(d) + " (shape " +
                                      shape_text(*t) + "); accepted: 64, 128");
  }
  if (precision == XSTAGE_ATTN_PRECISION_FP8 && d != kFp8HeadDim) {
    return fail(XSTAGE_ERR_VALUE, std::string(name) + ": head_dim (dimension 3) " + std::to_string(d) + " (shape " +
                                      shape_text(*t) + ") with precision " + std::to_string(precision) + " (" +
                                      precision_macro(precision) + "); accepted: " + std::to_string(kFp8HeadDim) +
                                      " (or XSTAGE_ATTN_PRECISION_BF16)");
  }
  return XSTAGE_OK;
}

// [first, last) byte range a tensor's elements occupy (empty when a dimension is 0).
struct Extent {
  uintptr_t first = 0, last = 0;
};

Extent extent_of(const DLTensor& t) {
  const uintptr_t base = reinterpret_cast<uintptr_t>(data_of(t));
  const int64_t elem = (int64_t(t.dtype.bits) * t.dtype.lanes + 7) / 8;
  int64_t lo = 0, hi = 0;
  for (int d = 0; d < t.ndim; ++d) {
    if (t.shape[d] <= 0) return {};
    const int64_t step = (t.shape[d] - 1) * stride_of(t, d);
    (step < 0 ? lo : hi) += step;
  }
  return Extent{base + uintptr_t(lo * elem), base + uintptr_t((hi + 1) * elem)};
}

bool overlap(const Extent& a, const Extent& b) {
  return a.first < a.last && b.first < b.last && a.first < b.last && b.first < a.last;
}

// The workspace against the precision, alone and against the call's other tensors; its size needs the
// kernel's layout (check_workspace_size).
int check_workspace(const Call& c) {
  if (c.precision == XSTAGE_ATTN_PRECISION_BF16 && !c.workspace) return XSTAGE_OK;  // optional: whole tiles
  if (!c.workspace) {
    return fail(XSTAGE_ERR_VALUE, "workspace: missing (null tensor) with precision 1 (XSTAGE_ATTN_PRECISION_FP8); "
                                  "accepted: a 1-D uint8 CUDA tensor of xstage_attention_workspace_bytes bytes");
  }
  const DLTensor& w = *c.workspace;
  int status = XSTAGE_OK;
  std::string why = check_cuda_tensor("workspace", &w, kDLUInt, 8, 1, "uint8", "1 ([bytes])", &status);
  if (!why.empty()) return fail(status, why);
  why = check_same_device("workspace", w, "q", *c.q);
  if (!why.empty()) return fail(XSTAGE_ERR_VALUE, why);
  if (!is_contiguous(w)) {
    return fail(XSTAGE_ERR_VALUE, "workspace: stride " + std::to_string(stride_of(w, 0)) +
                                      "; accepted: a contiguous buffer (stride 1)");
  }
  const uintptr_t address = reinterpret_cast<uintptr_t>(data_of(w));
  if (address % kWorkspaceAlign != 0) {
    return fail(XSTAGE_ERR_VALUE, "workspace: data address " + std::to_string(address) + " is " +
                                      std::to_string(address % kWorkspaceAlign) +
                                      " bytes past a 256-byte boundary; accepted: 256-byte aligned");
  }
  const Extent ws = extent_of(w);
  for (const auto& [name, t] : {std::pair{"q", c.q}, {"k", c.k}, {"v", c.v}, {"out", c.out}, {"lse", c.lse}}) {
    if (t && overlap(ws, extent_of(*t))) {
      return fail(XSTAGE_ERR_VALUE, std::string("workspace: its memory overlaps ") + name +
                                        "'s; accepted: a buffer of its own (the kernel overwrites it)");
    }
  }
  return XSTAGE_OK;
}

// Checks that need no kernel: presence, device, dtype, rank, head_dim, one device, the lse buffer, the
// scale, the precision and the workspace (but its size). Shape agreement between q, k, v and out is the
// public API's (attn_forward_args_from_views).
int check_tensors(const Call& c) {
  if (const int s = check_precision(c.precision); s != XSTAGE_OK) return s;
  int status = XSTAGE_OK;
  for (const auto& [name, t] : {std::pair{"q", c.q}, {"k", c.k}, {"v", c.v}}) {
    if (const int s = check_bshd(name, t, c.precision); s != XSTAGE_OK) return s;
  }
  std::string why = check_cuda_tensor("out", c.out, kDLBfloat, 16, 4, "bfloat16", kBshd, &status);
  if (!why.empty()) return fail(status, why);
  for (const auto& [name, t] : {std::pair{"k", c.k}, {"v", c.v}, {"out", c.out}}) {
    why = check_same_device(name, *t, "q", *c.q);
    if (!why.empty()) return fail(XSTAGE_ERR_VALUE, why);
  }
  const DLTensor* q = c.q;
  if (const DLTensor* lse = c.lse) {
    why = check_cuda_tensor("lse", lse, kDLFloat, 32, 3, "float32", "3 ([batch, heads, seq_q])", &status);
    if (!why.empty()) return fail(status, why);
    if (lse->shape[0] != q->shape[0] || lse->shape[1] != q->shape[2] || lse->shape[2] != q->shape[1]) {
      return fail(XSTAGE_ERR_VALUE, "lse: shape " + shape_text(*lse) + "; accepted: [" + std::to_string(q->shape[0]) +
                                        ", " + std::to_string(q->shape[2]) + ", " + std::to_string(q->shape[1]) +
                                        "] ([batch, heads, seq_q] of q " + shape_text(*q) + ")");
    }
    if (!is_contiguous(*lse)) return fail(XSTAGE_ERR_VALUE, "lse: not contiguous; accepted: a contiguous buffer");
    why = check_same_device("lse", *lse, "q", *q);
    if (!why.empty()) return fail(XSTAGE_ERR_VALUE, why);
  }
  if (!(c.softmax_scale >= 0.f) || !std::isfinite(c.softmax_scale)) {
    return fail(XSTAGE_ERR_VALUE, "softmax_scale: " + std::to_string(c.softmax_scale) +
                                      "; accepted: a positive finite number (0 or None: 1/sqrt(head_dim))");
  }
  return check_workspace(c);
}

#if XSTAGE_CAPI_HAVE_CUDA


// The calling thread's current device set to `device` for a scope (bf16's workspace size is the split tail
// plan of the tensors' device), restored after.
struct CurrentDevice {
  int saved = -1;
  explicit CurrentDevice(int device) {
    if (cudaGetDevice(&saved) != cudaSuccess || saved == device || cudaSetDevice(device) != cudaSuccess) saved = -1;
  }
  ~CurrentDevice() {
    if (saved >= 0) cudaSetDevice(saved);
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;
};

// The workspace's size against the layout the kernel writes (the problem's shapes): the FP8 pre-pass's, or
// bf16's split tail partials.
int check_workspace_size(const Call& c, const attn::AttnForwardProblem& p) {
  if (!c.workspace) return XSTAGE_OK;
  const bool fp8 = c.precision == XSTAGE_ATTN_PRECISION_FP8;
  const size_t need = attn::attn_forward_workspace_bytes(p, precision_of(c.precision));
  const int64_t have = c.workspace->shape[0];
  if (have < 0 || uint64_t(have) < need) {
    return fail(XSTAGE_ERR_VALUE, "workspace: " + std::to_string(have) + " bytes (shape " +
                                      shape_text(*c.workspace) + "); precision " +
                                      (fp8 ? "1 (XSTAGE_ATTN_PRECISION_FP8)" : "0 (XSTAGE_ATTN_PRECISION_BF16)") +
                                      " needs " + std::to_string(need) + " for q " + shape_text(*c.q) + " and k " +
                                      shape_text(*c.k) + " (xstage_attention_workspace_bytes" +
                                      (fp8 ? ")" : "; or NULL)"));
  }
  return XSTAGE_OK;
}

// Every check, then the forward arguments. A view of q, k or v the kernel cannot read is
// XSTAGE_ERR_LAYOUT (the caller may copy it); out's layout is the caller's buffer: XSTAGE_ERR_VALUE.
int prepare(const Call& c, attn::AttnForwardArgs* args) {
  if (const int s = check_tensors(c); s != XSTAGE_OK) return s;
  const CurrentDevice on_q(c.q->device.device_id);
  const attn::BshdView vq = view_of(*c.q), vk = view_of(*c.k), vv = view_of(*c.v), vo = view_of(*c.out);
  float* lse_ptr = c.lse ? static_cast<float*>(const_cast<void*>(data_of(*c.lse))) : nullptr;
  std::string why = attn::attn_forward_args_from_views(vq, vk, vv, vo, lse_ptr, c.softmax_scale, args);
  if (!why.empty()) return fail(XSTAGE_ERR_VALUE, why);
  if (const int s = check_workspace_size(c, args->problem); s != XSTAGE_OK) return s;
  for (const auto& [name, view] : {std::pair{"q", &vq}, {"k", &vk}, {"v", &vv}}) {
    why = attn::attn_view_can_implement(name, *view);
    if (!why.empty()) return fail(XSTAGE_ERR_LAYOUT, why);
  }
  why = attn::attn_view_can_implement("out", vo);
  if (!why.empty()) return fail(XSTAGE_ERR_VALUE, why);
  if (lse_ptr && reinterpret_cast<uintptr_t>(lse_ptr) % 4 != 0) {
    return fail(XSTAGE_ERR_VALUE, "lse: data pointer not 4-byte aligned");
  }
  args->precision = precision_of(c.precision);
  if (c.workspace) {
    args->workspace = const_cast<void*>(data_of(*c.workspace));
    args->workspace_bytes = size_t(c.workspace->shape[0]);
  }
  why = attn::attn_forward_can_implement(*args);
  if (!why.empty()) return fail(XSTAGE_ERR_VALUE, why);
  return XSTAGE_OK;
}

int launch(const attn::AttnForwardArgs& args, int device, cudaStream_t stream) {
  // The work runs on the tensors' device; the calling thread's current device is restored.
  int current = 0;
  cudaError_t e = cudaGetDevice(&current);
  if (e == cudaSuccess && current != device) e = cudaSetDevice(device);
  if (e == cudaSuccess) e = attn::attn_forward(args, stream);
  if (current != device) cudaSetDevice(current);
  if (e == cudaErrorNoKernelImageForDevice) {
    return fail(XSTAGE_ERR_UNSUPPORTED, "attention: device cuda:" + std::to_string(device) +
                                            " is not sm_90 (the kernel is built for H100/H200, sm_90a)");
  }
  if (e != cudaSuccess) {
    return fail(XSTAGE_ERR_CUDA, std::string("attention launch on cuda:") + std::to_string(device) + ": " +
                                     cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
  }
  return ok();
}

#endif  // XSTAGE_CAPI_HAVE_CUDA

// Every check of a call without a launch (builds without CUDA: those that need no kernel).
int check_call(const Call& c) {
#if XSTAGE_CAPI_HAVE_CUDA
  attn::AttnForwardArgs args;
  const int s = prepare(c, &args);
#else
  const int s = check_tensors(c);
#endif
  return s == XSTAGE_OK ? ok() : s;
}

int forward(const Call& c, void* stream) {
#if XSTAGE_CAPI_HAVE_CUDA
  attn::AttnForwardArgs args;
  if (const int s = prepare(c, &args); s != XSTAGE_OK) return s;
  return launch(args, c.q->device.device_id, static_cast<cudaStream_t>(stream));
#else
  (void)stream;
  if (const int s = check_tensors(c); s != XSTAGE_OK) return s;
  return fail(XSTAGE_ERR_UNSUPPORTED, "xstage was built without CUDA (no nvcc at build time): no attention kernel");
#endif
}

}  // namespace
}  // namespace xstage::capi

extern "C" {

int xstage_attention_check(const DLTensor* q, const DLTensor* k, const DLTensor* v, const DLTensor* out,
                           const DLTensor* lse, float softmax_scale) {
  using namespace xstage::capi;
  return guarded([&] { return check_call(Call{q, k, v, out, lse, softmax_scale}); });
}

int xstage_attention_check_call(const xstage_attention_call* call) {
  using namespace xstage::capi;
  if (!call) return fail(XSTAGE_ERR_VALUE, "xstage_attention_check_call: call: null pointer");
  return guarded([&] { return check_call(call_of(*call)); });
}

int xstage_attention_view_check(const DLTensor* t, const char* name) {
  using namespace xstage::capi;
  return guarded([&] {
    const char* n = name ? name : "tensor";
    int status = XSTAGE_OK;
    std::string why = check_cuda_tensor(n, t, kDLBfloat, 16, 4, "bfloat16", kBshd, &status);
    if (!why.empty()) return fail(status, why);
#if XSTAGE_CAPI_HAVE_CUDA
    why = xstage::attn::attn_view_can_implement(n, view_of(*t));
    if (!why.empty()) return fail(XSTAGE_ERR_LAYOUT, why);
    return ok();
#else
    return fail(XSTAGE_ERR_UNSUPPORTED, "xstage was built without CUDA: no attention kernel");
#endif
  });
}

int xstage_attention_workspace_bytes(const DLTensor* q, const DLTensor* k, int precision, uint64_t* bytes) {
  using namespace xstage::capi;
  return guarded([&] {
    if (!bytes) return fail(XSTAGE_ERR_VALUE, "xstage_attention_workspace_bytes: bytes: null pointer");
    *bytes = 0;
    if (const int s = check_precision(precision); s != XSTAGE_OK) return s;
    for (const auto& [name, t] : {std::pair{"q", q}, {"k", k}}) {
      if (const int s = check_bshd(name, t, precision); s != XSTAGE_OK) return s;
    }
    std::string why = check_same_device("k", *k, "q", *q);
    if (!why.empty()) return fail(XSTAGE_ERR_VALUE, why);
#if XSTAGE_CAPI_HAVE_CUDA
    // k stands in for v and q for out: the shape rules of a whole call, with k's own messages.
    const xstage::attn::BshdView vq = view_of(*q), vk = view_of(*k);
    xstage::attn::AttnForwardArgs args;
    why = xstage::attn::attn_forward_args_from_views(vq, vk, vk, vq, nullptr, 0.f, &args);
    if (!why.empty()) return fail(XSTAGE_ERR_VALUE, why);
    const CurrentDevice on_q(q->device.device_id);
    *bytes = xstage::attn::attn_forward_workspace_bytes(args.problem, precision_of(precision));
    return ok();
#else
    if (precision == XSTAGE_ATTN_PRECISION_BF16) return ok();
    return fail(XSTAGE_ERR_UNSUPPORTED, std::string("xstage was built without CUDA: the workspace of precision ") +
                                            std::to_string(precision) + " (" + precision_macro(precision) +
                                            ") is the kernel's layout");
#endif
  });
}

int xstage_attention_forward(const DLTensor* q, const DLTensor* k, const DLTensor* v, DLTensor* out, DLTensor* lse,
                             float softmax_scale, void* stream) {
  using namespace xstage::capi;
  return guarded([&] { return forward(Call{q, k, v, out, lse, softmax_scale}, stream); });
}

int xstage_attention_forward_call(const xstage_attention_call* call) {
  using namespace xstage::capi;
  if (!call) return fail(XSTAGE_ERR_VALUE, "xstage_attention_forward_call: call: null pointer");
  return guarded([&] { return forward(call_of(*call), call->stream); });
}

}  // extern "C"
