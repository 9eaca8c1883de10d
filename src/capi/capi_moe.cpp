// C ABI of the fused MoE layer (include/xstage/c_api_moe.h): DLPack tensors to the public C++ API
// (xstage/moe/fused_moe.hpp), every check before the launch, the launch on the caller's stream.
#include "xstage/c_api_moe.h"

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "capi_common.hpp"
#include "capi_team.hpp"
#include "xstage/model/error.hpp"
#include "xstage/model/platform.hpp"
#include "xstage/model/workloads.hpp"
#include "xstage/sim/moe_order_simulation.hpp"

#if XSTAGE_CAPI_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "xstage/gpu/check.hpp"
#include "fused_moe_testing.hpp"
#include "xstage/moe/fused_moe.hpp"
#endif

#if XSTAGE_CAPI_HAVE_CUDA
struct xstage_moe_layer {
  explicit xstage_moe_layer(const xstage::moe::FusedMoeConfig& c) : moe(c) {}
  xstage::moe::FusedMoe moe;
  xstage::moe::FusedMoeWeights weights;
  bool have_weights = false;
  std::string failure;  // xstage_moe_last_failure's storage
};
#else
struct xstage_moe_layer {};
#endif

namespace xstage::capi {
namespace {

constexpr const char* kNoCuda = "xstage was built without CUDA (no nvcc at build time): no fused MoE kernel";

#if XSTAGE_CAPI_HAVE_CUDA
using moe::FusedMoe;
using moe::FusedMoeConfig;

int config_of(int device, int hidden, int h_inter, int experts, int top_k, int max_tokens, int precision, int schedule,
              int lead_rows, int experts_per_wave, FusedMoeConfig* c) {
  if (precision != XSTAGE_MOE_BF16 && precision != XSTAGE_MOE_FP8) {
    return fail(XSTAGE_ERR_VALUE, "precision: " + std::to_string(precision) + "; accepted: 0 (bf16), 1 (fp8)");
  }
  if (schedule != XSTAGE_MOE_INTERLEAVED && schedule != XSTAGE_MOE_WAVE) {
    return fail(XSTAGE_ERR_VALUE, "schedule: " + std::to_string(schedule) + "; accepted: 0 (interleaved), 1 (wave)");
  }
  c->hidden = hidden;
  c->h_inter = h_inter;
  c->experts = experts;
  c->top_k = top_k;
  c->max_tokens = max_tokens;
  c->precision = precision == XSTAGE_MOE_FP8 ? moe::FusedMoePrecision::kFp8 : moe::FusedMoePrecision::kBf16;
  c->schedule = schedule == XSTAGE_MOE_WAVE ? moe::FusedMoeSchedule::kWave : moe::FusedMoeSchedule::kInterleaved;
  c->lead_rows = lead_rows;
  c->experts_per_wave = experts_per_wave;
  c->device = device;
  const std::string why = FusedMoe::can_implement(*c);
  if (!why.empty()) {
    return fail(why.find("sm_90a") != std::string::npos || why.rfind("device: no CUDA", 0) == 0 ? XSTAGE_ERR_UNSUPPORTED
                                                                                                  : XSTAGE_ERR_VALUE,
                why);
  }
  return XSTAGE_OK;
}

std::string dims_text(const std::vector<long long>& dims) {
  std::string s = "[";
  for (long long d : dims) s += (s.size() > 1 ? ", " : "") + std::to_string(d);
  return s + "]";
}

// A compact CUDA tensor of dtype (code, bits) and exactly `want` as its shape, on the layer's device.
int check_exact(const char* name, const DLTensor* t, uint8_t code, uint8_t bits, const char* dtype_accepted,
                const std::vector<long long>& want, const char* meaning, int device) {
  int status = XSTAGE_OK;
  const std::string rank = std::to_string(want.size()) + " (" + meaning + ")";
  std::string why = check_cuda_tensor(name, t, code, bits, int(want.size()), dtype_accepted, rank.c_str(), &status);
  if (!why.empty()) return fail(status, why);
  int d = 0;
  for (long long w : want) {
    if (t->shape[d++] != w) {
      return fail(XSTAGE_ERR_VALUE, std::string(name) + ": shape " + shape_text(*t) + "; accepted: " + dims_text(want) +
                                        " (" + meaning + ")");
    }
  }
  if (!is_contiguous(*t)) return fail(XSTAGE_ERR_VALUE, std::string(name) + ": not contiguous; accepted: a compact row-major tensor");
  if (t->device.device_id != device) {
    return fail(XSTAGE_ERR_VALUE, std::string(name) + ": on " + device_name(t->device) + ", the layer is on cuda:" +
                                      std::to_string(device));
  }
  return XSTAGE_OK;
}

// The run's arguments from the tensors; every shape, dtype and device check.
int run_args(xstage_moe_layer* layer, const DLTensor* x, const DLTensor* ids, const DLTensor* wts, const DLTensor* y,
             moe::FusedMoeArguments* a) {
  if (!layer) return fail(XSTAGE_ERR_VALUE, "layer: null handle");
  const FusedMoeConfig& c = layer->moe.config();
  // Every tensor's own fields (shape array, rank, sizes) before any of them is read.
  for (const auto& [name, t] : {std::pair{"x", x}, {"topk_ids", ids}, {"topk_weights", wts}, {"y", y}})
    if (t)
      if (std::string bad = check_tensor_structure(name, t); !bad.empty()) return fail(XSTAGE_ERR_VALUE, bad);
  if (x && x->ndim == 2 && x->shape[0] == 0) {
    // No tokens: nothing is read or written, so the (possibly null) data is not looked at; a team rank
    // still runs, its experts serving the other ranks' rows.
    for (const auto& [name, t] : {std::pair{"topk_ids", ids}, {"topk_weights", wts}, {"y", y}}) {
      if (!t || t->ndim != 2 || t->shape[0] != 0) {
        return fail(XSTAGE_ERR_VALUE, std::string(name) + ": " + (t ? "shape " + shape_text(*t) : "missing") +
                                          "; accepted: 0 rows, as x (shape " + shape_text(*x) + ")");
      }
    }
    if (!layer->have_weights) return fail(XSTAGE_ERR_VALUE, "w1: the layer has no weights (xstage_moe_set_weights)");
    a->tokens = 0;
    a->weights = layer->weights;
    return XSTAGE_OK;
  }
  int status = XSTAGE_OK;
  std::string why = check_cuda_tensor("x", x, kDLBfloat, 16, 2, "bfloat16", "2 ([tokens, hidden])", &status);
  if (!why.empty()) return fail(status, why);
  const long long T = x->shape[0];
  if (T > c.max_tokens) {
    return fail(XSTAGE_ERR_VALUE, "x: " + std::to_string(T) + " tokens (shape " + shape_text(*x) +
                                      ") exceed the layer's max_tokens " + std::to_string(c.max_tokens));
  }
  const int dev = c.device;
  if (int s = check_exact("x", x, kDLBfloat, 16, "bfloat16", {T, c.hidden}, "[tokens, hidden]", dev); s) return s;
  if (int s = check_exact("topk_ids", ids, kDLInt, 32, "int32", {T, c.top_k}, "[tokens, top_k]", dev); s) return s;
  if (int s = check_exact("topk_weights", wts, kDLFloat, 32, "float32", {T, c.top_k}, "[tokens, top_k]", dev); s) return s;
  if (int s = check_exact("y", y, kDLBfloat, 16, "bfloat16", {T, c.hidden}, "[tokens, hidden]", dev); s) return s;
  if (!layer->have_weights) return fail(XSTAGE_ERR_VALUE, "w1: the layer has no weights (xstage_moe_set_weights)");
  a->tokens = int(T);
  a->x = data_of(*x);
  a->topk_ids = static_cast<const std::int32_t*>(data_of(*ids));
  a->topk_weights = static_cast<const float*>(data_of(*wts));
  a->y = const_cast<void*>(data_of(*y));
  a->weights = layer->weights;
  return XSTAGE_OK;
}

std::uint64_t workspace_bytes_of(const FusedMoeConfig& c) { return FusedMoe::workspace_bytes(c); }
#else
template <class Config>
std::uint64_t workspace_bytes_of(const Config&) {
  return 0;  // never called: with_config fails first in builds without CUDA
}
#endif  // XSTAGE_CAPI_HAVE_CUDA

// The checked configuration from the C arguments, then use(config); every failure as a status.
template <class Use>
int with_config(int device, int hidden, int h_inter, int experts, int top_k, int max_tokens, int precision,
                int schedule, int lead_rows, int experts_per_wave, Use&& use) {
#if XSTAGE_CAPI_HAVE_CUDA
  return guarded_layer([&] {
    FusedMoeConfig c;
    if (int s = config_of(device, hidden, h_inter, experts, top_k, max_tokens, precision, schedule, lead_rows,
                          experts_per_wave, &c);
        s)
      return s;
    return use(c);
  });
#else
  (void)device, (void)hidden, (void)h_inter, (void)experts, (void)top_k, (void)max_tokens, (void)precision,
      (void)schedule, (void)lead_rows, (void)experts_per_wave, (void)use;
  return fail(XSTAGE_ERR_UNSUPPORTED, kNoCuda);
#endif
}

}  // namespace
}  // namespace xstage::capi

extern "C" {

int xstage_moe_can_implement(int device, int hidden, int h_inter, int experts, int top_k, int max_tokens, int precision,
                             int schedule, int lead_rows, int experts_per_wave, uint64_t* workspace_bytes) {
  using namespace xstage::capi;
  return with_config(device, hidden, h_inter, experts, top_k, max_tokens, precision, schedule, lead_rows,
                     experts_per_wave, [&](const auto& c) {
                       if (workspace_bytes) *workspace_bytes = workspace_bytes_of(c);
                       return ok();
                     });
}

int xstage_moe_create(int device, int hidden, int h_inter, int experts, int top_k, int max_tokens, int precision,
                      int schedule, int lead_rows, int experts_per_wave, xstage_moe_layer** out) {
  using namespace xstage::capi;
  if (!out) return fail(XSTAGE_ERR_VALUE, "out: null pointer");
  *out = nullptr;
  return with_config(device, hidden, h_inter, experts, top_k, max_tokens, precision, schedule, lead_rows,
                     experts_per_wave, [&](const auto& c) {
                       *out = new xstage_moe_layer(c);
                       return ok();
                     });
}

int xstage_moe_create_on_team(xstage_team* team, int hidden, int h_inter, int experts, int top_k, int max_tokens,
                              int precision, int schedule, int lead_rows, int experts_per_wave, double wait_timeout_s,
                              xstage_moe_layer** out) {
  using namespace xstage::capi;
  if (!out) return fail(XSTAGE_ERR_VALUE, "out: null pointer");
  *out = nullptr;
#if XSTAGE_CAPI_HAVE_DIST
  if (!team) return fail(XSTAGE_ERR_VALUE, "team: null handle");
  if (!(wait_timeout_s > 0.0 && wait_timeout_s <= 10.0)) {
    return fail(XSTAGE_ERR_VALUE, "wait_timeout_s: " + std::to_string(wait_timeout_s) + "; accepted: (0, 10] seconds");
  }
  return guarded_layer([&] {
    FusedMoeConfig c;
    c.team = &team->team;
    c.timeout_s = wait_timeout_s;
    if (int s = config_of(-1, hidden, h_inter, experts, top_k, max_tokens, precision, schedule, lead_rows,
                          experts_per_wave, &c);
        s)
      return s;
    *out = new xstage_moe_layer(c);
    return ok();
  });
#else
  (void)team, (void)hidden, (void)h_inter, (void)experts, (void)top_k, (void)max_tokens, (void)precision,
      (void)schedule, (void)lead_rows, (void)experts_per_wave, (void)wait_timeout_s;
  return fail(XSTAGE_ERR_UNSUPPORTED, "xstage was built without the distributed layer (needs CUDA and NCCL at build time)");
#endif
}

int xstage_moe_team_info(xstage_moe_layer* layer, int* rank, int* ranks) {
  using namespace xstage::capi;
#if XSTAGE_CAPI_HAVE_CUDA
  return guarded_layer([&] {
    if (!layer) return fail(XSTAGE_ERR_VALUE, "layer: null handle");
    if (rank) *rank = layer->moe.rank();
    if (ranks) *ranks = layer->moe.ranks();
    return ok();
  });
#else
  (void)layer, (void)rank, (void)ranks;
  return fail(XSTAGE_ERR_UNSUPPORTED, kNoCuda);
#endif
}

void xstage_moe_destroy(xstage_moe_layer* layer) {
  try {
    delete layer;
  } catch (...) {
  }
}

int xstage_moe_set_schedule(xstage_moe_layer* layer, int schedule, int lead_rows, int experts_per_wave) {
  using namespace xstage::capi;
#if XSTAGE_CAPI_HAVE_CUDA
  return guarded_layer([&] {
    if (!layer) return fail(XSTAGE_ERR_VALUE, "layer: null handle");
    if (schedule != XSTAGE_MOE_INTERLEAVED && schedule != XSTAGE_MOE_WAVE) {
      return fail(XSTAGE_ERR_VALUE, "schedule: " + std::to_string(schedule) + "; accepted: 0 (interleaved), 1 (wave)");
    }
    layer->moe.set_schedule(schedule == XSTAGE_MOE_WAVE ? xstage::moe::FusedMoeSchedule::kWave
                                                        : xstage::moe::FusedMoeSchedule::kInterleaved,
                            lead_rows, experts_per_wave);
    return ok();
  });
#else
  (void)layer, (void)schedule, (void)lead_rows, (void)experts_per_wave;
  return fail(XSTAGE_ERR_UNSUPPORTED, kNoCuda);
#endif
}

int xstage_moe_set_weights(xstage_moe_layer* layer, const DLTensor* w1, const DLTensor* w2, const DLTensor* w1_scale,
                           const DLTensor* w2_scale) {
  using namespace xstage::capi;
#if XSTAGE_CAPI_HAVE_CUDA
  return guarded_layer([&] {
    if (!layer) return fail(XSTAGE_ERR_VALUE, "layer: null handle");
    const FusedMoeConfig& c = layer->moe.config();
    const bool fp8 = c.precision == xstage::moe::FusedMoePrecision::kFp8;
    // The experts held here: all of them on one GPU, experts / ranks on a team rank.
    const long long E = layer->moe.local_experts(), H = c.hidden, HI = c.h_inter;
    const bool team = layer->moe.ranks() > 1;
    const uint8_t code = fp8 ? uint8_t(kDLUInt) : uint8_t(kDLBfloat);
    const uint8_t bits = fp8 ? 8 : 16;
    const char* dtype = fp8 ? "uint8 (e4m3 bytes; torch: w.view(torch.uint8))" : "bfloat16";
    if (int s = check_exact("w1", w1, code, bits, dtype, {E, 2 * HI, H},
                            team ? "[local experts = experts / ranks, 2*h_inter, hidden]" : "[experts, 2*h_inter, hidden]",
                            c.device); s) return s;
    if (int s = check_exact("w2", w2, code, bits, dtype, {E, H, HI},
                            team ? "[local experts = experts / ranks, hidden, h_inter]" : "[experts, hidden, h_inter]",
                            c.device); s) return s;
    xstage::moe::FusedMoeWeights w;
    w.w1 = data_of(*w1);
    w.w2 = data_of(*w2);
    if (fp8) {
      if (!w1_scale) return fail(XSTAGE_ERR_VALUE, "w1_scale: required for an fp8 layer");
      if (!w2_scale) return fail(XSTAGE_ERR_VALUE, "w2_scale: required for an fp8 layer");
      if (int s = check_exact("w1_scale", w1_scale, kDLFloat, 32, "float32", {E, 2 * HI / 128, H / 128},
                              "[experts, 2*h_inter/128, hidden/128]", c.device);
          s)
        return s;
      if (int s = check_exact("w2_scale", w2_scale, kDLFloat, 32, "float32", {E, H / 128, HI / 128},
                              "[experts, hidden/128, h_inter/128]", c.device);
          s)
        return s;
      w.w1_scale = static_cast<const float*>(data_of(*w1_scale));
      w.w2_scale = static_cast<const float*>(data_of(*w2_scale));
    } else if (w1_scale || w2_scale) {
      return fail(XSTAGE_ERR_VALUE, std::string(w1_scale ? "w1_scale" : "w2_scale") +
                                        ": given for a bf16 layer; accepted: NULL (scales belong to fp8 weights)");
    }
    for (const auto& [name, p] : {std::pair{"w1", w.w1}, {"w2", w.w2}}) {
      if (reinterpret_cast<uintptr_t>(p) % 16 != 0) {
        return fail(XSTAGE_ERR_VALUE, std::string(name) + ": data not 16-byte aligned (TMA); accepted: an aligned tensor");
      }
    }
    layer->weights = w;
    layer->have_weights = true;
    return ok();
  });
#else
  (void)layer, (void)w1, (void)w2, (void)w1_scale, (void)w2_scale;
  return fail(XSTAGE_ERR_UNSUPPORTED, kNoCuda);
#endif
}

int xstage_moe_check(xstage_moe_layer* layer, const DLTensor* x, const DLTensor* topk_ids, const DLTensor* topk_weights,
                     const DLTensor* y, void* stream) {
  using namespace xstage::capi;
#if XSTAGE_CAPI_HAVE_CUDA
  return guarded_layer([&] {
    xstage::moe::FusedMoeArguments a;
    if (int s = run_args(layer, x, topk_ids, topk_weights, y, &a); s) return s;
    const std::string why = layer->moe.check(a, static_cast<cudaStream_t>(stream));
    return why.empty() ? ok() : fail(XSTAGE_ERR_VALUE, why);
  });
#else
  (void)layer, (void)x, (void)topk_ids, (void)topk_weights, (void)y, (void)stream;
  return fail(XSTAGE_ERR_UNSUPPORTED, kNoCuda);
#endif
}

int xstage_moe_run(xstage_moe_layer* layer, const DLTensor* x, const DLTensor* topk_ids, const DLTensor* topk_weights,
                   DLTensor* y, void* stream) {
  using namespace xstage::capi;
#if XSTAGE_CAPI_HAVE_CUDA
  return guarded_layer([&] {
    xstage::moe::FusedMoeArguments a;
    if (int s = run_args(layer, x, topk_ids, topk_weights, y, &a); s) return s;
    layer->moe.run(a, static_cast<cudaStream_t>(stream));  // checks again, then launches
    return ok();
  });
#else
  (void)layer, (void)x, (void)topk_ids, (void)topk_weights, (void)y, (void)stream;
  return fail(XSTAGE_ERR_UNSUPPORTED, kNoCuda);
#endif
}

int xstage_moe_info(xstage_moe_layer* layer, int* grid, int* schedule_param, uint64_t* runs) {
  using namespace xstage::capi;
#if XSTAGE_CAPI_HAVE_CUDA
  return guarded_layer([&] {
    if (!layer) return fail(XSTAGE_ERR_VALUE, "layer: null handle");
    if (grid) *grid = layer->moe.grid();
    if (schedule_param) *schedule_param = layer->moe.schedule_param();
    if (runs) *runs = layer->moe.runs();
    return ok();
  });
#else
  (void)layer, (void)grid, (void)schedule_param, (void)runs;
  return fail(XSTAGE_ERR_UNSUPPORTED, kNoCuda);
#endif
}

const char* xstage_moe_last_failure(xstage_moe_layer* layer) {
#if XSTAGE_CAPI_HAVE_CUDA
  if (!layer) return "";
  try {
    layer->failure = layer->moe.last_failure();
  } catch (...) {
    return "";
  }
  return layer->failure.c_str();
#else
  (void)layer;
  return "";
#endif
}

int xstage_testing_moe_withhold_rows(xstage_moe_layer* layer, uint64_t rows) {
  using namespace xstage::capi;
#if XSTAGE_CAPI_HAVE_CUDA
  return guarded_layer([&] {
    if (!layer) return fail(XSTAGE_ERR_VALUE, "layer: null handle");
    if (rows == 0 || rows > (1u << 20)) return fail(XSTAGE_ERR_VALUE, "rows: " + std::to_string(rows) + "; accepted: 1..2^20");
    xstage::moe::FusedMoeTesting::withhold_rows(layer->moe, rows);
    return ok();
  });
#else
  (void)layer, (void)rows;
  return fail(XSTAGE_ERR_UNSUPPORTED, kNoCuda);
#endif
}

int xstage_moe_quantize_fp8(const DLTensor* w, DLTensor* q, DLTensor* scales, void* stream) {
  using namespace xstage::capi;
#if XSTAGE_CAPI_HAVE_CUDA
  return guarded_layer([&] {
    if (!w) return fail(XSTAGE_ERR_VALUE, "w: null tensor");
    if (w->ndim != 2 && w->ndim != 3) {
      return fail(XSTAGE_ERR_VALUE, "w: " + std::to_string(w->ndim) + " dimensions (shape " + shape_text(*w) +
                                        "); accepted: 2 ([rows, cols]) or 3 ([matrices, rows, cols])");
    }
    const bool batched = w->ndim == 3;
    const long long m = batched ? w->shape[0] : 1, rows = w->shape[w->ndim - 2], cols = w->shape[w->ndim - 1];
    if (rows % 128 != 0 || cols % 128 != 0 || rows <= 0 || cols <= 0) {
      return fail(XSTAGE_ERR_VALUE, "w: shape " + shape_text(*w) + "; accepted: rows and cols multiples of 128");
    }
    const int dev = w->device.device_id;
    const char* meaning = batched ? "[matrices, rows, cols]" : "[rows, cols]";
    const char* smeaning = batched ? "[matrices, rows/128, cols/128]" : "[rows/128, cols/128]";
    const std::vector<long long> shape = batched ? std::vector<long long>{m, rows, cols} : std::vector<long long>{rows, cols};
    const std::vector<long long> sshape = batched ? std::vector<long long>{m, rows / 128, cols / 128}
                                                  : std::vector<long long>{rows / 128, cols / 128};
    if (int s = check_exact("w", w, kDLBfloat, 16, "bfloat16", shape, meaning, dev); s) return s;
    if (int s = check_exact("q", q, kDLUInt, 8, "uint8", shape, meaning, dev); s) return s;
    if (int s = check_exact("scales", scales, kDLFloat, 32, "float32", sshape, smeaning, dev); s) return s;
    int current = 0;
    XSTAGE_CUDA_CHECK(cudaGetDevice(&current));
    if (current != dev) XSTAGE_CUDA_CHECK(cudaSetDevice(dev));
    try {
      xstage::moe::quantize_weight_blocks_fp8(data_of(*w), int(m), int(rows), int(cols), const_cast<void*>(data_of(*q)),
                                              static_cast<float*>(const_cast<void*>(data_of(*scales))),
                                              static_cast<cudaStream_t>(stream));
    } catch (...) {
      if (current != dev) cudaSetDevice(current);
      throw;
    }
    if (current != dev) cudaSetDevice(current);
    return ok();
  });
#else
  (void)w, (void)q, (void)scales, (void)stream;
  return fail(XSTAGE_ERR_UNSUPPORTED, kNoCuda);
#endif
}

int xstage_moe_predict_schedule(int hidden, int h_inter, int experts, int top_k, int tokens, int ranks, int precision,
                                int grid, int lead_rows, int experts_per_wave, int* choice, double* predicted_speedup) {
  using namespace xstage::capi;
  return guarded([&]() -> int {
    if (!choice) return fail(XSTAGE_ERR_VALUE, "choice: a NULL pointer");
    if (precision != XSTAGE_MOE_BF16 && precision != XSTAGE_MOE_FP8)
      return fail(XSTAGE_ERR_VALUE, "precision: " + std::to_string(precision) + "; accepted: 0 (bf16), 1 (fp8)");
    try {  // the dimensions, tokens and ranks are checked by balanced_expert_load and predict_moe_schedule
      xstage::sim::MoeScheduleQuery q;
      q.hidden = hidden;
      q.h_inter = h_inter;
      q.experts = experts;
      q.top_k = top_k;
      q.ranks = ranks;
      q.grid = grid;
      q.lead_rows = lead_rows;
      q.experts_per_wave = experts_per_wave;
      q.precision = precision == XSTAGE_MOE_FP8 ? "fp8" : "bf16";
      const auto load = xstage::sim::balanced_expert_load(tokens, ranks, experts, top_k);
      const auto p = xstage::sim::predict_moe_schedule(xstage::model::default_platform(), q, load);
      *choice = p.choice == xstage::sim::MoeOrder::kExpertWave ? XSTAGE_MOE_WAVE : XSTAGE_MOE_INTERLEAVED;
      if (predicted_speedup) *predicted_speedup = p.predicted_speedup;
      return ok();
    } catch (const xstage::InputError& e) {
      return fail(XSTAGE_ERR_VALUE, e.what());
    }
  });
}

const char* xstage_moe_builtin_shapes(void) {
  try {
    static const std::string text = [] {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& s : xstage::model::builtin_moe_shapes()) {
        j.push_back({{"name", s.name}, {"source", s.source}, {"hidden", s.hidden}, {"h_inter", s.h_inter},
                     {"experts", s.experts}, {"top_k", s.top_k}});
      }
      return j.dump();
    }();
    return text.c_str();
  } catch (...) {
    return "[]";
  }
}

}  // extern "C"
