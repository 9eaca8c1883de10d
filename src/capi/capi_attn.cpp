// C ABI of the attention forward: DLPack tensors to the public C++ API (xstage/attn/forward.hpp),
// every check before the launch, the launch on the caller's stream.
#include <cmath>
#include <string>

#include "capi_common.hpp"

#if XSTAGE_CAPI_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "capi_views.hpp"
#include "xstage/attn/forward.hpp"
#endif

namespace xstage::capi {
namespace {

constexpr const char* kBshd = "4 ([batch, seq, heads, head_dim])";

// Checks that need no kernel: presence, device, dtype, rank, head_dim, one device, the lse buffer and
// the scale. Shape agreement between q, k, v and out is the public API's (attn_forward_args_from_views).
int check_tensors(const DLTensor* q, const DLTensor* k, const DLTensor* v, const DLTensor* out, const DLTensor* lse,
                  float softmax_scale) {
  int status = XSTAGE_OK;
  for (const auto& [name, t] : {std::pair{"q", q}, {"k", k}, {"v", v}, {"out", out}}) {
    std::string why = check_cuda_tensor(name, t, kDLBfloat, 16, 4, "bfloat16", kBshd, &status);
    if (!why.empty()) return fail(status, why);
  }
  for (const auto& [name, t] : {std::pair{"q", q}, {"k", k}, {"v", v}}) {
    const int64_t d = t->shape[3];
    if (d != 64 && d != 128) {
      return fail(XSTAGE_ERR_VALUE, std::string(name) + ": head_dim (dimension 3) " + std::to_string(d) +
                                        " (shape " + shape_text(*t) + "); accepted: 64, 128");
    }
  }
  for (const auto& [name, t] : {std::pair{"k", k}, {"v", v}, {"out", out}}) {
    std::string why = check_same_device(name, *t, "q", *q);
    if (!why.empty()) return fail(XSTAGE_ERR_VALUE, why);
  }
  if (lse) {
    std::string why = check_cuda_tensor("lse", lse, kDLFloat, 32, 3, "float32", "3 ([batch, heads, seq_q])", &status);
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
  if (!(softmax_scale >= 0.f) || !std::isfinite(softmax_scale)) {
    return fail(XSTAGE_ERR_VALUE, "softmax_scale: " + std::to_string(softmax_scale) +
                                      "; accepted: a positive finite number (0 or None: 1/sqrt(head_dim))");
  }
  return XSTAGE_OK;
}

#if XSTAGE_CAPI_HAVE_CUDA

// Every check, then the forward arguments. A view of q, k or v the kernel cannot read is
// XSTAGE_ERR_LAYOUT (the caller may copy it); out's layout is the caller's buffer: XSTAGE_ERR_VALUE.
int prepare(const DLTensor* q, const DLTensor* k, const DLTensor* v, const DLTensor* out, const DLTensor* lse,
            float softmax_scale, attn::AttnForwardArgs* args) {
  if (const int s = check_tensors(q, k, v, out, lse, softmax_scale); s != XSTAGE_OK) return s;
  const attn::BshdView vq = view_of(*q), vk = view_of(*k), vv = view_of(*v), vo = view_of(*out);
  float* lse_ptr = lse ? static_cast<float*>(const_cast<void*>(data_of(*lse))) : nullptr;
  std::string why = attn::attn_forward_args_from_views(vq, vk, vv, vo, lse_ptr, softmax_scale, args);
  if (!why.empty()) return fail(XSTAGE_ERR_VALUE, why);
  for (const auto& [name, view] : {std::pair{"q", &vq}, {"k", &vk}, {"v", &vv}}) {
    why = attn::attn_view_can_implement(name, *view);
    if (!why.empty()) return fail(XSTAGE_ERR_LAYOUT, why);
  }
  why = attn::attn_view_can_implement("out", vo);
  if (!why.empty()) return fail(XSTAGE_ERR_VALUE, why);
  if (lse_ptr && reinterpret_cast<uintptr_t>(lse_ptr) % 4 != 0) {
    return fail(XSTAGE_ERR_VALUE, "lse: data pointer not 4-byte aligned");
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

}  // namespace
}  // namespace xstage::capi

extern "C" {

int xstage_attention_check(const DLTensor* q, const DLTensor* k, const DLTensor* v, const DLTensor* out,
                           const DLTensor* lse, float softmax_scale) {
  using namespace xstage::capi;
  return guarded([&] {
#if XSTAGE_CAPI_HAVE_CUDA
    xstage::attn::AttnForwardArgs args;
    const int s = prepare(q, k, v, out, lse, softmax_scale, &args);
#else
    const int s = check_tensors(q, k, v, out, lse, softmax_scale);
#endif
    return s == XSTAGE_OK ? ok() : s;
  });
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

int xstage_attention_forward(const DLTensor* q, const DLTensor* k, const DLTensor* v, DLTensor* out, DLTensor* lse,
                             float softmax_scale, void* stream) {
  using namespace xstage::capi;
  return guarded([&] {
#if XSTAGE_CAPI_HAVE_CUDA
    xstage::attn::AttnForwardArgs args;
    if (const int s = prepare(q, k, v, out, lse, softmax_scale, &args); s != XSTAGE_OK) return s;
    return launch(args, q->device.device_id, static_cast<cudaStream_t>(stream));
#else
    (void)stream;
    if (const int s = check_tensors(q, k, v, out, lse, softmax_scale); s != XSTAGE_OK) return s;
    return fail(XSTAGE_ERR_UNSUPPORTED, "xstage was built without CUDA (no nvcc at build time): no attention kernel");
#endif
  });
}

int xstage_attention_forward_call(const xstage_attention_call* call) {
  if (!call) return xstage::capi::fail(XSTAGE_ERR_VALUE, "xstage_attention_forward_call: null call");
  return xstage_attention_forward(call->q, call->k, call->v, call->out, call->lse, call->softmax_scale, call->stream);
}

}  // extern "C"
