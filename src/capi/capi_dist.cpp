// C ABI of the distributed layer (include/xstage/c_api_dist.h): teams from an NCCL unique id and Ulysses
// attention over DLPack tensors. The shard arithmetic entries work in every build; the rest needs the
// communication library (CUDA builds with NCCL).
#include "xstage/c_api_dist.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "capi_common.hpp"
#include "xstage/model/error.hpp"
#include "xstage/ulysses/shards.hpp"

#if XSTAGE_CAPI_HAVE_DIST
#include <cuda_runtime_api.h>

#include "capi_team.hpp"
#include "capi_views.hpp"
#include "xstage/gpu/check.hpp"
#include "ulysses_testing.hpp"
#include "xstage/ulysses/ulysses.hpp"

struct xstage_ulysses {
  xstage_team* team;
  std::unique_ptr<xstage::ulysses::UlyssesAttention> attention;
  std::string failure;  // xstage_ulysses_last_failure's storage
};
#endif

namespace xstage::capi {
namespace {

constexpr const char* kBshd = "4 ([batch, seq, heads, head_dim])";

int unavailable() {
  return fail(XSTAGE_ERR_UNSUPPORTED,
              "xstage was built without the distributed layer (needs CUDA and NCCL at build time)");
}

#if XSTAGE_CAPI_HAVE_DIST

// Restores the calling thread's current device when the call ends (the work runs on the team's GPU).
class DeviceGuard {
 public:
  DeviceGuard() { ok_ = cudaGetDevice(&saved_) == cudaSuccess; }
  ~DeviceGuard() {
    if (ok_) cudaSetDevice(saved_);
  }

 private:
  int saved_ = 0;
  bool ok_ = false;
};

// The precision of code `code` (c_api.h's XSTAGE_ATTN_PRECISION_*), or XSTAGE_ERR_VALUE naming `precision`.
int precision_arg(int code, attn::AttnPrecision* precision) {
  if (const int st = check_precision(code); st != XSTAGE_OK) return st;
  *precision = precision_of(code);
  return XSTAGE_OK;
}

// Fills `args` from `call`, checking each tensor alone first (presence, CUDA device of the team,
// bf16, rank 4); the shapes and layouts are UlyssesAttention::can_implement's.
int ulysses_args(const xstage_ulysses* u, const xstage_ulysses_call* call, int precision,
                 ulysses::UlyssesForwardArgs* args) {
  if (!u) return fail(XSTAGE_ERR_VALUE, "ulysses: null handle");
  if (!call) return fail(XSTAGE_ERR_VALUE, "ulysses: null call");
  if (const int s = precision_arg(precision, &args->precision); s != XSTAGE_OK) return s;
  const int device = u->team->team.local_ranks()[0].device;
  struct Entry {
    const char* name;
    const DLTensor* t;
    bool required;
    attn::BshdView* view;
  };
  const Entry entries[] = {{"q", call->q, true, &args->q},
                           {"k", call->k, true, &args->k},
                           {"v", call->v, true, &args->v},
                           {"out", call->out, true, &args->out},
                           {"joint_q", call->joint_q, false, &args->joint_q},
                           {"joint_k", call->joint_k, false, &args->joint_k},
                           {"joint_v", call->joint_v, false, &args->joint_v},
                           {"joint_out", call->joint_out, false, &args->joint_out}};
  for (const Entry& e : entries) {
    if (!e.t && !e.required) continue;
    int status = XSTAGE_OK;
    const std::string why = check_cuda_tensor(e.name, e.t, kDLBfloat, 16, 4, "bfloat16", kBshd, &status);
    if (!why.empty()) return fail(status, why);
    if (e.t->device.device_id != device) {
      return fail(XSTAGE_ERR_VALUE, std::string(e.name) + ": on " + device_name(e.t->device) + "; the team's GPU is cuda:" +
                                        std::to_string(device));
    }
    *e.view = view_of(*e.t);
  }
  if (call->seq < 1 || call->seq > (int64_t(1) << 30))
    return fail(XSTAGE_ERR_VALUE, "seq " + std::to_string(call->seq) + " (1..2^30)");
  args->seq = int(call->seq);
  args->softmax_scale = call->softmax_scale;
  ulysses::UlyssesRefusal kind = ulysses::UlyssesRefusal::kNone;
  const std::string why = u->attention->can_implement(*args, &kind);
  if (!why.empty()) return fail(kind == ulysses::UlyssesRefusal::kLayout ? XSTAGE_ERR_LAYOUT : XSTAGE_ERR_VALUE, why);
  return XSTAGE_OK;
}

#endif  // XSTAGE_CAPI_HAVE_DIST

}  // namespace
}  // namespace xstage::capi

extern "C" {

int xstage_dist_available(void) { return XSTAGE_CAPI_HAVE_DIST; }

int xstage_ulysses_shard_info(int64_t seq, int world, int rank, int64_t out[4]) {
  using namespace xstage::capi;
  return guarded_layer([&] {
    if (!out) return fail(XSTAGE_ERR_VALUE, "out: null");
    const int64_t probe = seq >= world && world >= 1 && seq <= (int64_t(1) << 30)
                              ? xstage::attn::a2a_local_len(int(seq), world, rank < 0 ? 0 : rank)
                              : 0;
    const std::string why = xstage::ulysses::ulysses_local_len_error(seq, world, rank, probe);
    if (!why.empty()) return fail(XSTAGE_ERR_VALUE, why);
    const int s = int(seq);
    out[0] = xstage::attn::a2a_shard_len(s, world);
    out[1] = xstage::attn::a2a_local_len(s, world, rank);
    out[2] = xstage::attn::a2a_own_rows_last_rotation(s, world, rank);
    out[3] = xstage::ulysses::tensor_split_len(seq, world, rank);
    return ok();
  });
}

int xstage_ulysses_split_check(const int64_t* local_lens, int world) {
  using namespace xstage::capi;
  return guarded_layer([&] {
    if (!local_lens || world < 1) return fail(XSTAGE_ERR_VALUE, "local_lens: null or world " + std::to_string(world));
    const std::string why = xstage::ulysses::ulysses_split_error(std::vector<int64_t>(local_lens, local_lens + world));
    return why.empty() ? ok() : fail(XSTAGE_ERR_VALUE, why);
  });
}

int xstage_ulysses_heads_check(int64_t heads, int world) {
  using namespace xstage::capi;
  return guarded_layer([&] {
    const std::string why = xstage::ulysses::ulysses_heads_error(heads, world);
    return why.empty() ? ok() : fail(XSTAGE_ERR_VALUE, why);
  });
}

int xstage_dist_unique_id(uint8_t* out, int64_t size) {
  using namespace xstage::capi;
  return guarded_layer([&] {
    if (!out || size != XSTAGE_NCCL_UNIQUE_ID_BYTES)
      return fail(XSTAGE_ERR_VALUE, "unique id buffer: size " + std::to_string(size) + " (accepted: " +
                                        std::to_string(XSTAGE_NCCL_UNIQUE_ID_BYTES) + ")");
#if XSTAGE_CAPI_HAVE_DIST
    static_assert(sizeof(ncclUniqueId) == XSTAGE_NCCL_UNIQUE_ID_BYTES, "ncclUniqueId size");
    const ncclUniqueId id = xstage::comm::Team::new_unique_id();
    std::memcpy(out, &id, sizeof(id));
    return ok();
#else
    return unavailable();
#endif
  });
}

int xstage_team_create(const uint8_t* id, int64_t id_size, int rank, int world, int device, double timeout_s,
                       xstage_team** out) {
  using namespace xstage::capi;
  return guarded_layer([&] {
    if (!out) return fail(XSTAGE_ERR_VALUE, "out: null");
    *out = nullptr;
    if (!id || id_size != XSTAGE_NCCL_UNIQUE_ID_BYTES)
      return fail(XSTAGE_ERR_VALUE, "id: size " + std::to_string(id_size) + " (accepted: " +
                                        std::to_string(XSTAGE_NCCL_UNIQUE_ID_BYTES) + " bytes)");
    if (world < 1) return fail(XSTAGE_ERR_VALUE, "world " + std::to_string(world) + " (at least 1)");
    if (rank < 0 || rank >= world)
      return fail(XSTAGE_ERR_VALUE, "rank " + std::to_string(rank) + " (0.." + std::to_string(world - 1) + ")");
    if (!(timeout_s > 0) || !std::isfinite(timeout_s))
      return fail(XSTAGE_ERR_VALUE, "timeout_s " + std::to_string(timeout_s) + " (a positive number of seconds)");
#if XSTAGE_CAPI_HAVE_DIST
    ncclUniqueId uid;
    std::memcpy(&uid, id, sizeof(uid));
    DeviceGuard guard;
    *out = new xstage_team{xstage::comm::Team::from_unique_id(uid, rank, world, device, timeout_s)};
    return ok();
#else
    (void)device;
    return unavailable();
#endif
  });
}

int xstage_team_destroy(xstage_team* team) {
  using namespace xstage::capi;
  return guarded_layer([&] {
#if XSTAGE_CAPI_HAVE_DIST
    DeviceGuard guard;
    delete team;
#else
    (void)team;
#endif
    return ok();
  });
}

int xstage_ulysses_create(xstage_team* team, int64_t max_seq_local, int64_t heads, int64_t head_dim,
                          int64_t max_joint, double wait_timeout_s, xstage_ulysses** out) {
  return xstage_ulysses_create_with_precision(team, max_seq_local, heads, head_dim, max_joint, wait_timeout_s,
                                              XSTAGE_ATTN_PRECISION_BF16, out);
}

int xstage_ulysses_create_with_precision(xstage_team* team, int64_t max_seq_local, int64_t heads, int64_t head_dim,
                                         int64_t max_joint, double wait_timeout_s, int precision,
                                         xstage_ulysses** out) {
  using namespace xstage::capi;
  return guarded_layer([&] {
    if (!out) return fail(XSTAGE_ERR_VALUE, "out: null");
    *out = nullptr;
#if XSTAGE_CAPI_HAVE_DIST
    xstage::attn::AttnPrecision prec{};
    if (const int s = precision_arg(precision, &prec); s != XSTAGE_OK) return s;
#else
    (void)precision;
#endif
    if (!team) return fail(XSTAGE_ERR_VALUE, "team: null");
    const int64_t big = int64_t(1) << 30;
    for (const auto& [name, v] : {std::pair{"max_seq_local", max_seq_local}, {"heads", heads}, {"head_dim", head_dim},
                                  {"max_joint", max_joint}}) {
      if (v < 0 || v > big) return fail(XSTAGE_ERR_VALUE, std::string(name) + " " + std::to_string(v) + " (0..2^30)");
    }
    if (!(wait_timeout_s > 0) || !std::isfinite(wait_timeout_s) || wait_timeout_s > 3600)
      return fail(XSTAGE_ERR_VALUE, "wait_timeout_s " + std::to_string(wait_timeout_s) + " (0 < t <= 3600 seconds)");
#if XSTAGE_CAPI_HAVE_DIST
    xstage::ulysses::UlyssesLimits lim;
    lim.max_seq_local = int(max_seq_local);
    lim.heads = int(heads);
    lim.head_dim = int(head_dim);
    lim.max_joint = int(max_joint);
    lim.precision = prec;
    const std::string why = xstage::ulysses::UlyssesAttention::limits_error(lim, team->team.world_size());
    if (!why.empty()) return fail(XSTAGE_ERR_VALUE, why);
    DeviceGuard guard;
    auto u = std::make_unique<xstage::ulysses::UlyssesAttention>(team->team, lim, uint64_t(wait_timeout_s * 1e9));
    *out = new xstage_ulysses{team, std::move(u)};
    return ok();
#else
    return unavailable();
#endif
  });
}

int xstage_ulysses_reserve(xstage_ulysses* u, int64_t max_seq_local, int64_t max_joint) {
  return xstage_ulysses_reserve_with_precision(u, max_seq_local, max_joint, XSTAGE_ATTN_PRECISION_BF16);
}

int xstage_ulysses_reserve_with_precision(xstage_ulysses* u, int64_t max_seq_local, int64_t max_joint,
                                          int precision) {
  using namespace xstage::capi;
  return guarded_layer([&] {
    if (!u) return fail(XSTAGE_ERR_VALUE, "ulysses: null handle");
#if XSTAGE_CAPI_HAVE_DIST
    xstage::attn::AttnPrecision prec{};
    if (const int s = precision_arg(precision, &prec); s != XSTAGE_OK) return s;
    if (max_seq_local < 0 || max_seq_local > (int64_t(1) << 30) || max_joint < 0 || max_joint > (int64_t(1) << 30))
      return fail(XSTAGE_ERR_VALUE, "max_seq_local " + std::to_string(max_seq_local) + ", max_joint " +
                                        std::to_string(max_joint) + " (0..2^30)");
    xstage::ulysses::UlyssesLimits lim = u->attention->limits();
    lim.max_seq_local = int(max_seq_local);
    lim.max_joint = int(max_joint);
    lim.precision = prec;  // fp8 adds the FP8 workspace; bf16 keeps what the object has
    DeviceGuard guard;
    u->attention->reserve(lim);
    return ok();
#else
    (void)max_seq_local;
    (void)max_joint;
    (void)precision;
    return unavailable();
#endif
  });
}

int xstage_ulysses_destroy(xstage_ulysses* u) {
  using namespace xstage::capi;
  return guarded_layer([&] {
#if XSTAGE_CAPI_HAVE_DIST
    DeviceGuard guard;
    delete u;
#else
    (void)u;
#endif
    return ok();
  });
}

int xstage_ulysses_check(xstage_ulysses* u, const xstage_ulysses_call* call) {
  return xstage_ulysses_check_with_precision(u, call, XSTAGE_ATTN_PRECISION_BF16);
}

int xstage_ulysses_check_with_precision(xstage_ulysses* u, const xstage_ulysses_call* call, int precision) {
  using namespace xstage::capi;
  return guarded_layer([&] {
#if XSTAGE_CAPI_HAVE_DIST
    xstage::ulysses::UlyssesForwardArgs args;
    const int s = ulysses_args(u, call, precision, &args);
    return s == XSTAGE_OK ? ok() : s;
#else
    (void)u;
    (void)call;
    (void)precision;
    return unavailable();
#endif
  });
}

int xstage_ulysses_forward(xstage_ulysses* u, const xstage_ulysses_call* call) {
  return xstage_ulysses_forward_with_precision(u, call, XSTAGE_ATTN_PRECISION_BF16);
}

int xstage_ulysses_forward_with_precision(xstage_ulysses* u, const xstage_ulysses_call* call, int precision) {
  using namespace xstage::capi;
  return guarded_layer([&] {
#if XSTAGE_CAPI_HAVE_DIST
    xstage::ulysses::UlyssesForwardArgs args;
    if (const int s = ulysses_args(u, call, precision, &args); s != XSTAGE_OK) return s;
    DeviceGuard guard;
    u->attention->forward(args, static_cast<cudaStream_t>(call->stream));
    return ok();
#else
    (void)u;
    (void)call;
    (void)precision;
    return unavailable();
#endif
  });
}

const char* xstage_ulysses_last_failure(xstage_ulysses* u) {
#if XSTAGE_CAPI_HAVE_DIST
  if (!u) return "";
  try {
    u->failure = u->attention->last_failure();
  } catch (...) {
    return "";
  }
  return u->failure.c_str();
#else
  (void)u;
  return "";
#endif
}

int xstage_testing_ulysses_withhold_flags(xstage_ulysses* u, uint32_t epochs) {
  using namespace xstage::capi;
  return guarded_layer([&] {
#if XSTAGE_CAPI_HAVE_DIST
    if (!u) return fail(XSTAGE_ERR_VALUE, "ulysses: null handle");
    if (epochs > (1u << 20)) return fail(XSTAGE_ERR_VALUE, "epochs: " + std::to_string(epochs) + "; accepted: 0..2^20");
    xstage::ulysses::UlyssesTesting::withhold_flags(*u->attention, epochs);
    return ok();
#else
    (void)u, (void)epochs;
    return unavailable();
#endif
  });
}

int xstage_testing_ulysses_emulated_rank(const DLTensor* q, const DLTensor* k, const DLTensor* v, int64_t heads,
                                         int rank, int world, DLTensor* const* owner_out, float softmax_scale,
                                         void* stream) {
  return xstage_testing_ulysses_emulated_rank_with_precision(q, k, v, heads, rank, world, owner_out, softmax_scale,
                                                             stream, XSTAGE_ATTN_PRECISION_BF16);
}

int xstage_testing_ulysses_emulated_rank_with_precision(const DLTensor* q, const DLTensor* k, const DLTensor* v,
                                                        int64_t heads, int rank, int world, DLTensor* const* owner_out,
                                                        float softmax_scale, void* stream, int precision) {
  using namespace xstage::capi;
  return guarded_layer([&] {
#if XSTAGE_CAPI_HAVE_DIST
    xstage::attn::AttnPrecision prec{};
    if (const int s = precision_arg(precision, &prec); s != XSTAGE_OK) return s;
    int status = XSTAGE_OK;
    for (const auto& [name, t] : {std::pair{"q", q}, {"k", k}, {"v", v}}) {
      const std::string why = check_cuda_tensor(name, t, kDLBfloat, 16, 4, "bfloat16", kBshd, &status);
      if (!why.empty()) return fail(status, why);
      if (t->shape[0] != 1 || !is_contiguous(*t)) return fail(XSTAGE_ERR_VALUE, std::string(name) + ": batch 1, contiguous");
    }
    if (world < 1 || world > 8 || !owner_out) return fail(XSTAGE_ERR_VALUE, "world " + std::to_string(world) + " (1..8)");
    const int seq = int(q->shape[1]);
    std::vector<void*> outs(world);
    for (int p = 0; p < world; ++p) {
      const DLTensor* o = owner_out[p];
      if (o)
        if (std::string bad = check_tensor_structure("owner_out", o); !bad.empty()) return fail(XSTAGE_ERR_VALUE, bad);
      if (!o || o->ndim != 3 || !is_contiguous(*o) || o->shape[0] != xstage::attn::a2a_local_len(seq, world, p) ||
          o->shape[1] != heads || o->shape[2] != q->shape[3])
        return fail(XSTAGE_ERR_VALUE, "owner_out[" + std::to_string(p) + "]: [local_len, heads, head_dim] contiguous");
      outs[p] = const_cast<void*>(data_of(*o));
    }
    DeviceGuard guard;
    if (cudaSetDevice(q->device.device_id) != cudaSuccess) return fail(XSTAGE_ERR_CUDA, "cudaSetDevice");
    const std::string why = xstage::ulysses::testing::emulated_rank_forward(
        data_of(*q), data_of(*k), data_of(*v), seq, int(k->shape[1]), int(heads), int(q->shape[3]), rank, world,
        outs.data(), softmax_scale, static_cast<cudaStream_t>(stream), prec);
    return why.empty() ? ok() : fail(XSTAGE_ERR_VALUE, why);
#else
    (void)q, (void)k, (void)v, (void)heads, (void)rank, (void)world, (void)owner_out, (void)softmax_scale, (void)stream;
    (void)precision;
    return unavailable();
#endif
  });
}

}  // extern "C"
