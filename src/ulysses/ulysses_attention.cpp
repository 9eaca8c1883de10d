// Ulysses attention over caller-owned buffers (include/xstage/ulysses/ulysses.hpp): the work buffers and
// the symmetric window, the checks, and one forward's launch order on the caller's stream.
#include "xstage/ulysses/ulysses.hpp"

#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "attn_fp8_quant.hpp"
#include "ulysses_kernels.hpp"
#include "ulysses_testing.hpp"
#include "ulysses_epilogue.hpp"
#include "xstage/comm/window.hpp"
#include "xstage/gpu/check.hpp"
#include "xstage/model/error.hpp"

namespace xstage::ulysses {

using attn::A2AEpilogueParams;
using attn::AttnForwardArgs;
using attn::AttnPrecision;
using attn::BshdView;

namespace {

constexpr std::size_t kAlign = 4096;
constexpr std::size_t kFlagBytes = sizeof(uint32_t) * attn::kA2AMaxRanks * attn::kA2AMaxCtas;
// The owner's wait and the output copy keep this order; fused-tma is the variant the API runs.
constexpr attn::FusedEpilogue kEpilogue = attn::FusedEpilogue::kPiggybackTma;
constexpr attn::UlyssesTileOrder kOrder = attn::UlyssesTileOrder::kOwnLast;

std::size_t align_up(std::size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

std::string shape_text(const BshdView& v) {
  return "[" + std::to_string(v.size[0]) + ", " + std::to_string(v.size[1]) + ", " + std::to_string(v.size[2]) + ", " +
         std::to_string(v.size[3]) + "]";
}

// Empty when view `v` is [batch, rows, heads, dim] bf16 whose rows are `heads * dim` contiguous elements
// (what the pack kernel and the window copies read and write) at a 16-byte-aligned address and batch stride.
std::string rows_contiguous_error(const char* name, const BshdView& v, int64_t heads, int64_t dim) {
  const bool rows = v.stride[3] == 1 && v.stride[2] == dim && (v.size[1] == 1 || v.stride[1] == heads * dim);
  const bool aligned = reinterpret_cast<uintptr_t>(v.data) % 16 == 0 && (v.size[0] == 1 || v.stride[0] % 8 == 0);
  if (rows && aligned) return {};
  return std::string(name) + ": strides [" + std::to_string(v.stride[0]) + ", " + std::to_string(v.stride[1]) + ", " +
         std::to_string(v.stride[2]) + ", " + std::to_string(v.stride[3]) + "] at a " +
         (reinterpret_cast<uintptr_t>(v.data) % 16 == 0 ? "16-byte-aligned" : "misaligned") +
         " address; accepted: contiguous [seq, heads, head_dim] rows per batch, 16-byte aligned";
}

std::string shape_error(const char* name, const BshdView& v, int64_t batch, int64_t rows, int64_t heads, int64_t dim,
                        const char* rows_name) {
  if (v.size[0] == batch && v.size[1] == rows && v.size[2] == heads && v.size[3] == dim) return {};
  return std::string(name) + ": shape " + shape_text(v) + "; accepted: [" + std::to_string(batch) + ", " +
         std::to_string(rows) + " (" + rows_name + "), " + std::to_string(heads) + ", " + std::to_string(dim) + "]";
}

std::string precision_text(AttnPrecision p) {
  const char* name = attn::attn_precision_name(p);
  return name ? name : std::to_string(int(p));
}

// The FP8 pre-pass's workspace bytes for the largest problems `l` allows on `world` ranks: the fused
// attention (every query of the sequence against the sequence and the joint keys, this rank's heads) and
// the joint queries' attention (against the same keys). One workspace serves both: they run one after the
// other on the forward's stream. 0 for bf16.
std::size_t fp8_workspace_bytes(const UlyssesLimits& l, int world) {
  if (l.precision != AttnPrecision::kFp8) return 0;
  const int hl = l.heads / world, seq_max = l.max_seq_local * world, keys = seq_max + l.max_joint;
  std::size_t bytes = attn::attn_forward_workspace_bytes(attn::make_bshd_problem(1, seq_max, keys, hl, l.head_dim),
                                                         AttnPrecision::kFp8);
  if (l.max_joint > 0) {
    bytes = std::max(bytes, attn::attn_forward_workspace_bytes(attn::make_bshd_problem(1, l.max_joint, keys, hl, l.head_dim),
                                                               AttnPrecision::kFp8));
  }
  return bytes;
}

}  // namespace

struct UlyssesAttention::Impl {
  comm::Team& team;
  UlyssesLimits lim;
  uint64_t wait_timeout_ns;
  int rank = 0, world = 1, device = 0, hl = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t setup_stream = nullptr;  // the team's stream: set-up only
  std::unique_ptr<comm::SymmetricWindow> window;
  std::size_t out_bytes = 0;  // window: output [max_seq_local, H, D] at offset 0, flags after it
  uint16_t *pack[3] = {}, *qkv[3] = {};
  uint16_t *joint_q = nullptr, *joint_o = nullptr, *joint_gather = nullptr;
  uint32_t* epoch = nullptr;
  void** table = nullptr;  // [dst x world, flags x world]
  void* workspace = nullptr;  // the FP8 pre-pass's (precision fp8 only): cudaMalloc's 256-byte alignment
  std::size_t workspace_bytes = 0;
  // The owner's wait's failure record (host-mapped, attn::a2a_wait): allocated with the object, kept
  // across reserve(), read by last_failure() also after the CUDA context is lost.
  attn::A2AWaitFailure* failure_host = nullptr;
  attn::A2AWaitFailure* failure_dev = nullptr;
  uint32_t withheld_epochs = 0;  // UlyssesTesting::withhold_flags (0 otherwise)

  Impl(comm::Team& t, const UlyssesLimits& l, uint64_t timeout) : team(t), lim(l), wait_timeout_ns(timeout) {}
  void allocate();
  void release();
  // The attention call at precision p: fp8 on the object's workspace.
  void set_precision(AttnPrecision p, AttnForwardArgs& args) const {
    args.precision = p;
    if (p == AttnPrecision::kFp8) {
      args.workspace = workspace;
      args.workspace_bytes = workspace_bytes;
    }
  }
};

void UlyssesAttention::Impl::release() {
  cudaSetDevice(device);
  cudaDeviceSynchronize();
  for (int t = 0; t < 3; ++t) {
    cudaFree(pack[t]);
    cudaFree(qkv[t]);
    pack[t] = qkv[t] = nullptr;
  }
  cudaFree(joint_q);
  cudaFree(joint_o);
  cudaFree(joint_gather);
  cudaFree(epoch);
  cudaFree(table);
  cudaFree(workspace);
  joint_q = joint_o = joint_gather = nullptr;
  epoch = nullptr;
  table = nullptr;
  workspace = nullptr;
  workspace_bytes = 0;
  window.reset();
}

void UlyssesAttention::Impl::allocate() {
  XSTAGE_CUDA_CHECK(cudaSetDevice(device));
  const std::size_t d = std::size_t(lim.head_dim), n = std::size_t(world);
  const std::size_t rows = std::size_t(lim.max_seq_local), seq_max = rows * n, joint = std::size_t(lim.max_joint);
  const std::size_t row_elems = std::size_t(hl) * d;
  for (int t = 0; t < 3; ++t) {
    XSTAGE_CUDA_CHECK(cudaMalloc(&pack[t], std::max<std::size_t>(n * rows * row_elems * 2, 16)));
    // Q: the whole sequence; K, V: the sequence, then the joint rows.
    XSTAGE_CUDA_CHECK(cudaMalloc(&qkv[t], (seq_max + (t == 0 ? 0 : joint)) * row_elems * 2));
  }
  if (joint > 0) {
    XSTAGE_CUDA_CHECK(cudaMalloc(&joint_q, joint * row_elems * 2));
    XSTAGE_CUDA_CHECK(cudaMalloc(&joint_o, joint * row_elems * 2));
    XSTAGE_CUDA_CHECK(cudaMalloc(&joint_gather, n * joint * row_elems * 2));
  }
  XSTAGE_CUDA_CHECK(cudaMalloc(&epoch, sizeof(uint32_t)));
  XSTAGE_CUDA_CHECK(cudaMemset(epoch, 0, sizeof(uint32_t)));
  workspace_bytes = fp8_workspace_bytes(lim, world);
  if (workspace_bytes > 0) XSTAGE_CUDA_CHECK(cudaMalloc(&workspace, workspace_bytes));
  out_bytes = align_up(rows * std::size_t(lim.heads) * d * 2);
  window = std::make_unique<comm::SymmetricWindow>(team, out_bytes + align_up(kFlagBytes), 1);
  char* base = static_cast<char*>(window->local_ptr(0));
  XSTAGE_CUDA_CHECK(cudaMemset(base + out_bytes, 0, kFlagBytes));
  const std::vector<void*> h = attn::ulysses_window_owner_table(*window, 0, world, out_bytes, setup_stream);
  XSTAGE_CUDA_CHECK(cudaMalloc(&table, sizeof(void*) * h.size()));
  XSTAGE_CUDA_CHECK(cudaMemcpy(table, h.data(), sizeof(void*) * h.size(), cudaMemcpyHostToDevice));
  XSTAGE_CUDA_CHECK(cudaDeviceSynchronize());
  team.barrier();  // every rank's flags are zero before any peer may publish into them
}

std::string UlyssesAttention::limits_error(const UlyssesLimits& l, int world) {
  if (world < 1 || world > attn::kA2AMaxRanks)
    return "world size " + std::to_string(world) + " (1.." + std::to_string(attn::kA2AMaxRanks) + ")";
  if (attn::attn_precision_name(l.precision) == nullptr)
    return "precision " + precision_text(l.precision) + " (accepted: bf16, fp8)";
  if (l.precision == AttnPrecision::kFp8 && l.head_dim != attn::kFp8HeadDim)
    return "head_dim " + std::to_string(l.head_dim) + " with precision fp8 (the FP8 kernel supports " +
           std::to_string(attn::kFp8HeadDim) + ")";
  if (l.head_dim != 128) return "head_dim " + std::to_string(l.head_dim) + " (the fused kernel supports 128)";
  if (std::string why = ulysses_heads_error(l.heads, world); !why.empty()) return why;
  if (l.max_seq_local < 1) return "max_seq_local " + std::to_string(l.max_seq_local) + " (at least 1)";
  if (l.max_joint < 0) return "max_joint " + std::to_string(l.max_joint) + " (at least 0)";
  if (int64_t(l.max_seq_local) * world + l.max_joint > (int64_t(1) << 30))
    return "max_seq_local " + std::to_string(l.max_seq_local) + " (sequence over the team above 2^30 rows)";
  return {};
}

UlyssesAttention::UlyssesAttention(comm::Team& team, const UlyssesLimits& limits, uint64_t wait_timeout_ns)
    : impl_(std::make_unique<Impl>(team, limits, wait_timeout_ns)) {
  if (team.local_ranks().size() != 1)
    throw InputError("team: " + std::to_string(team.local_ranks().size()) +
                     " local ranks; UlyssesAttention drives one GPU per process (comm::Team::from_unique_id)");
  const std::string why = limits_error(limits, team.world_size());
  if (!why.empty()) throw InputError(why);
  if (wait_timeout_ns == 0) throw InputError("wait_timeout_ns 0 (at least 1)");
  Impl& m = *impl_;
  const comm::LocalRank& lr = team.local_ranks()[0];
  m.rank = lr.rank;
  m.world = team.world_size();
  m.device = lr.device;
  m.comm = lr.comm;
  m.setup_stream = lr.stream;
  m.hl = limits.heads / m.world;
  XSTAGE_CUDA_CHECK(cudaSetDevice(m.device));
  XSTAGE_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&m.failure_host), sizeof(attn::A2AWaitFailure),
                                  cudaHostAllocMapped));
  std::memset(m.failure_host, 0, sizeof(attn::A2AWaitFailure));
  try {  // the destructor does not run for a constructor that throws: free what was allocated here
    XSTAGE_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&m.failure_dev), m.failure_host, 0));
    m.allocate();
  } catch (...) {
    m.release();
    cudaFreeHost(m.failure_host);
    throw;
  }
}

UlyssesAttention::~UlyssesAttention() {
  impl_->release();
  cudaFreeHost(impl_->failure_host);  // after the context is lost this may fail: nothing else to free then
}

std::string UlyssesAttention::last_failure() const {
  attn::A2AWaitFailure f{};
  // Written by the device before its trap; `expired` last (attn::a2a_wait).
  std::memcpy(&f, impl_->failure_host, sizeof(f));
  return attn::a2a_wait_failure_text(f);
}

void UlyssesTesting::withhold_flags(UlyssesAttention& u, uint32_t epochs) { u.impl_->withheld_epochs = epochs; }

const UlyssesLimits& UlyssesAttention::limits() const { return impl_->lim; }
int UlyssesAttention::rank() const { return impl_->rank; }
int UlyssesAttention::world() const { return impl_->world; }

void UlyssesAttention::reserve(const UlyssesLimits& limits) {
  Impl& m = *impl_;
  if (limits.heads != m.lim.heads || limits.head_dim != m.lim.head_dim)
    throw InputError("reserve: heads " + std::to_string(limits.heads) + ", head_dim " + std::to_string(limits.head_dim) +
                     " (they stay " + std::to_string(m.lim.heads) + ", " + std::to_string(m.lim.head_dim) + ")");
  const std::string why = limits_error(limits, m.world);
  if (!why.empty()) throw InputError("reserve: " + why);
  // fp8 serves bf16 too: a bf16 reserve keeps an existing FP8 workspace (buffers only grow).
  const bool add_fp8 = limits.precision == AttnPrecision::kFp8 && m.lim.precision != AttnPrecision::kFp8;
  if (limits.max_seq_local <= m.lim.max_seq_local && limits.max_joint <= m.lim.max_joint && !add_fp8) return;
  m.release();
  m.lim.max_seq_local = std::max(limits.max_seq_local, m.lim.max_seq_local);
  m.lim.max_joint = std::max(limits.max_joint, m.lim.max_joint);
  if (add_fp8) m.lim.precision = AttnPrecision::kFp8;
  m.allocate();
}

std::string UlyssesAttention::can_implement(const UlyssesForwardArgs& a, UlyssesRefusal* kind) const {
  const Impl& m = *impl_;
  UlyssesRefusal dummy;
  UlyssesRefusal& k = kind ? *kind : dummy;
  k = UlyssesRefusal::kValue;
  const int64_t H = m.lim.heads, D = m.lim.head_dim, B = a.q.size[0];
  if (!a.q.data || !a.k.data || !a.v.data || !a.out.data) return "q, k, v and out are required";
  if (attn::attn_precision_name(a.precision) == nullptr)
    return "precision " + precision_text(a.precision) + " (accepted: bf16, fp8)";
  if (a.precision == AttnPrecision::kFp8 && m.lim.precision != AttnPrecision::kFp8) {
    return "precision fp8: this object was created for bf16 only (UlyssesLimits::precision " +
           precision_text(m.lim.precision) + "; create it with precision fp8, or raise it with reserve)";
  }
  if (B < 1) return "q: batch " + std::to_string(B) + " (shape " + shape_text(a.q) + "; at least 1)";
  if (a.q.size[2] != H) {
    return "q: heads (dimension 2) " + std::to_string(a.q.size[2]) + " (shape " + shape_text(a.q) + "); this object was created for " +
           std::to_string(H) + " heads";
  }
  if (std::string why = ulysses_local_len_error(a.seq, m.world, m.rank, a.q.size[1]); !why.empty()) return "seq: " + why;
  const int64_t s_r = a.q.size[1];
  if (s_r > m.lim.max_seq_local) {
    return "q: " + std::to_string(s_r) + " local rows exceed the reserved max_seq_local " +
           std::to_string(m.lim.max_seq_local) + " (grow it with reserve)";
  }
  for (const auto& [name, v] : {std::pair{"q", &a.q}, {"k", &a.k}, {"v", &a.v}, {"out", &a.out}}) {
    if (std::string why = shape_error(name, *v, B, s_r, H, D, "local rows"); !why.empty()) return why;
  }
  const bool jq = a.joint_q.data != nullptr, jk = a.joint_k.data != nullptr, jv = a.joint_v.data != nullptr;
  if (jk != jv) return "joint_k and joint_v: give both or neither";
  if (jq && !jk) return "joint_q: needs joint_k and joint_v (joint queries attend to the joint keys too)";
  if (jq != (a.joint_out.data != nullptr)) return "joint_out: required exactly when joint_q is given";
  const int64_t T = jk ? a.joint_k.size[1] : 0;
  if (jk) {
    if (T < 1) return "joint_k: " + std::to_string(T) + " joint tokens (shape " + shape_text(a.joint_k) + "; at least 1)";
    if (T > m.lim.max_joint) {
      return "joint_k: " + std::to_string(T) + " joint tokens exceed the reserved max_joint " +
             std::to_string(m.lim.max_joint) + " (grow it with reserve)";
    }
    for (const auto& [name, v] : {std::pair{"joint_k", &a.joint_k}, {"joint_v", &a.joint_v}}) {
      if (std::string why = shape_error(name, *v, B, T, H, D, "joint tokens"); !why.empty()) return why;
    }
    if (jq) {
      for (const auto& [name, v] : {std::pair{"joint_q", &a.joint_q}, {"joint_out", &a.joint_out}}) {
        if (std::string why = shape_error(name, *v, B, T, H, D, "joint tokens"); !why.empty()) return why;
      }
    }
  }
  if (!(a.softmax_scale >= 0.f) || !std::isfinite(a.softmax_scale))
    return "softmax_scale " + std::to_string(a.softmax_scale) + " (a positive finite number, or 0: 1/sqrt(head_dim))";
  // Layouts: the inputs may be copied by the caller (kLayout), the outputs are the caller's buffers.
  if (std::string why = rows_contiguous_error("out", a.out, H, D); !why.empty()) return why;
  if (jq) {
    if (std::string why = rows_contiguous_error("joint_out", a.joint_out, H, D); !why.empty()) return why;
  }
  k = UlyssesRefusal::kLayout;
  for (const auto& [name, v] : {std::pair{"q", &a.q}, {"k", &a.k}, {"v", &a.v}}) {
    if (std::string why = rows_contiguous_error(name, *v, H, D); !why.empty()) return why;
  }
  for (const auto& [name, v] : {std::pair{"joint_q", &a.joint_q}, {"joint_k", &a.joint_k}, {"joint_v", &a.joint_v}}) {
    if (!v->data) continue;
    // Row pitch free (cudaMemcpy2D takes each row's head slice), heads and dim contiguous.
    if (v->stride[3] != 1 || v->stride[2] != D || (v->size[1] > 1 && v->stride[1] < H * D))
      return std::string(name) + ": strides [" + std::to_string(v->stride[0]) + ", " + std::to_string(v->stride[1]) +
             ", " + std::to_string(v->stride[2]) + ", " + std::to_string(v->stride[3]) + "]; accepted: head and head_dim strides " +
             std::to_string(D) + ", 1 and a token stride of at least " + std::to_string(H * D);
  }
  k = UlyssesRefusal::kValue;
  // The fused kernel's own checks on this problem.
  const attn::AttnForwardProblem prob = attn::make_bshd_problem(1, a.seq, a.seq + int(T), m.hl, int(D));
  const int grid = attn::attn_fused_a2a_grid(prob, m.device, a.precision);
  if (grid < 1 || grid > attn::kA2AMaxCtas) return "fused attention grid " + std::to_string(grid) + " out of range";
  const A2AEpilogueParams ep =
      attn::ulysses_epilogue_params(m.rank, m.world, a.seq, m.hl, int(D), a.precision, kOrder, m.table, m.epoch);
  AttnForwardArgs fa{prob, m.qkv[0], m.qkv[1], m.qkv[2], nullptr, nullptr};
  m.set_precision(a.precision, fa);
  if (std::string why = attn::attn_fused_a2a_can_implement(fa, ep); !why.empty()) return "fused attention: " + why;
  if (jq) {
    AttnForwardArgs ja{attn::make_bshd_problem(1, int(T), a.seq + int(T), m.hl, int(D)), m.joint_q, m.qkv[1], m.qkv[2],
                       m.joint_o, nullptr};
    m.set_precision(a.precision, ja);
    if (std::string why = attn::attn_forward_can_implement(ja); !why.empty()) return "joint_q attention: " + why;
  }
  k = UlyssesRefusal::kNone;
  return {};
}

void UlyssesAttention::forward(const UlyssesForwardArgs& a, cudaStream_t stream) {
  if (std::string why = can_implement(a); !why.empty()) throw InputError(why);
  Impl& m = *impl_;
  if (std::string wait = last_failure(); !wait.empty()) {
    throw comm::TeamTimeout("an earlier forward's in-kernel wait expired: " + wait +
                            " (the kernel trapped: the CUDA context is lost, the process must restart)");
  }
  XSTAGE_CUDA_CHECK(cudaSetDevice(m.device));
  const int n = m.world, hl = m.hl, d = m.lim.head_dim, H = m.lim.heads, seq = a.seq;
  const int s_r = int(a.q.size[1]);
  const int T = a.joint_k.data ? int(a.joint_k.size[1]) : 0;
  const int shard = attn::a2a_shard_len(seq, n);
  const std::size_t row_elems = std::size_t(hl) * d;
  const A2AEpilogueParams ep = attn::ulysses_epilogue_params(m.rank, n, seq, hl, d, a.precision, kOrder, m.table, m.epoch);
  attn::AttnForwardProblem prob = attn::make_bshd_problem(1, seq, seq + T, hl, d);
  prob.softmax_scale = a.softmax_scale;
  const int grid = attn::attn_fused_a2a_grid(prob, m.device, a.precision);
  const uint16_t* window_out = static_cast<const uint16_t*>(m.window->local_ptr(0));
  const uint32_t* flags = reinterpret_cast<const uint32_t*>(static_cast<const char*>(m.window->local_ptr(0)) + m.out_bytes);
  auto at = [](const BshdView& v, int64_t b) {
    return static_cast<char*>(const_cast<void*>(v.data)) + b * v.stride[0] * 2;
  };
  const std::size_t pitch_hl = row_elems * 2;
  auto token_pitch = [&](const BshdView& v) { return v.size[1] > 1 ? std::size_t(v.stride[1]) * 2 : std::size_t(H) * d * 2; };
  for (int64_t b = 0; b < a.q.size[0]; ++b) {
    // Pack: rows [s_r, H, D] → per-peer blocks [n][s_r][hl][D] (peer p gets heads [p * hl, (p + 1) * hl)).
    const BshdView* in[3] = {&a.q, &a.k, &a.v};
    for (int t = 0; t < 3; ++t)
      XSTAGE_CUDA_CHECK(attn::head_block_copy(m.pack[t], at(*in[t], b), n, s_r, hl, d, true, stream));
    XSTAGE_NCCL_CHECK(ncclGroupStart());
    for (int t = 0; t < 3; ++t) {
      for (int p = 0; p < n; ++p) {
        XSTAGE_NCCL_CHECK(ncclSend(m.pack[t] + std::size_t(p) * s_r * row_elems, std::size_t(s_r) * row_elems,
                                   ncclBfloat16, p, m.comm, stream));
        // Q in this rank's rotated query order; K and V in sequence order.
        const std::size_t row = t == 0 ? std::size_t(attn::a2a_rotated_shard_start(p, shard, ep.row_rotation, seq))
                                       : std::size_t(p) * shard;
        XSTAGE_NCCL_CHECK(ncclRecv(m.qkv[t] + row * row_elems, std::size_t(attn::a2a_local_len(seq, n, p)) * row_elems,
                                   ncclBfloat16, p, m.comm, stream));
      }
    }
    XSTAGE_NCCL_CHECK(ncclGroupEnd());
    // Joint keys and values (replicated): this rank's heads, after the sequence's rows.
    const BshdView* joint[2] = {&a.joint_k, &a.joint_v};
    for (int t = 0; t < 2 && T > 0; ++t) {
      const BshdView& j = *joint[t];
      XSTAGE_CUDA_CHECK(cudaMemcpy2DAsync(m.qkv[t + 1] + std::size_t(seq) * row_elems, pitch_hl,
                                          at(j, b) + std::size_t(m.rank) * row_elems * 2, token_pitch(j),
                                          pitch_hl, std::size_t(T), cudaMemcpyDeviceToDevice, stream));
    }
    AttnForwardArgs fa{prob, m.qkv[0], m.qkv[1], m.qkv[2], nullptr, nullptr};
    m.set_precision(a.precision, fa);
    XSTAGE_CUDA_CHECK(attn::attn_forward_fused_a2a(fa, ep, kEpilogue, stream));
    XSTAGE_CUDA_CHECK(
        attn::a2a_wait(flags, m.epoch, n, grid, m.rank, m.wait_timeout_ns, stream, m.failure_dev, m.withheld_epochs));
    // The owner's rows, all heads, from the window to the caller's buffer. The next forward's
    // pre-attention exchange orders this copy before any peer's next store into the window: a peer
    // stores only after receiving this rank's next Q/K/V, sent after this copy on this stream.
    XSTAGE_CUDA_CHECK(cudaMemcpy2DAsync(at(a.out, b), std::size_t(H) * d * 2, window_out, std::size_t(H) * d * 2,
                                        std::size_t(H) * d * 2, std::size_t(s_r), cudaMemcpyDeviceToDevice, stream));
    if (a.joint_q.data) {
      // Joint queries: this rank's heads against every key (sequence + joint), then all heads gathered.
      const BshdView& j = a.joint_q;
      XSTAGE_CUDA_CHECK(cudaMemcpy2DAsync(m.joint_q, pitch_hl, at(j, b) + std::size_t(m.rank) * row_elems * 2,
                                          token_pitch(j), pitch_hl, std::size_t(T),
                                          cudaMemcpyDeviceToDevice, stream));
      attn::AttnForwardProblem jp = attn::make_bshd_problem(1, T, seq + T, hl, d);
      jp.softmax_scale = a.softmax_scale;
      AttnForwardArgs ja{jp, m.joint_q, m.qkv[1], m.qkv[2], m.joint_o, nullptr};
      m.set_precision(a.precision, ja);
      if (std::string why = attn::attn_forward_can_implement(ja); !why.empty()) throw InputError("joint_q: " + why);
      XSTAGE_CUDA_CHECK(attn::attn_forward(ja, stream));
      XSTAGE_NCCL_CHECK(ncclAllGather(m.joint_o, m.joint_gather, std::size_t(T) * row_elems, ncclBfloat16, m.comm, stream));
      XSTAGE_CUDA_CHECK(attn::head_block_copy(m.joint_gather, at(a.joint_out, b), n, T, hl, d, false, stream));
    }
  }
}

namespace testing {

std::string emulated_rank_forward(const void* q, const void* k, const void* v, int seq, int seq_k, int heads,
                                  int head_dim, int rank, int world, void* const* owner_out, float softmax_scale,
                                  cudaStream_t stream, AttnPrecision precision) {
  if (attn::attn_precision_name(precision) == nullptr)
    return "precision " + precision_text(precision) + " (accepted: bf16, fp8)";
  if (world < 1 || world > attn::kA2AMaxRanks) return "world " + std::to_string(world);
  if (std::string why = ulysses_heads_error(heads, world); !why.empty()) return why;
  if (std::string why = ulysses_local_len_error(seq, world, rank, attn::a2a_local_len(seq, world, rank)); !why.empty())
    return why;
  const int hl = heads / world;
  attn::AttnForwardProblem prob = attn::make_bshd_problem(1, seq, seq_k, hl, head_dim);
  prob.softmax_scale = softmax_scale;
  int device = 0;
  XSTAGE_CUDA_CHECK(cudaGetDevice(&device));
  const int grid = attn::attn_fused_a2a_grid(prob, device, precision);
  if (grid < 1 || grid > attn::kA2AMaxCtas) return "fused grid " + std::to_string(grid) + " out of range";
  std::vector<void*> h(2 * world);
  void** table = nullptr;
  uint32_t* epoch = nullptr;
  void* workspace = nullptr;
  const std::size_t workspace_bytes = attn::attn_forward_workspace_bytes(prob, precision, attn::AttnTail::kWhole);
  std::string result;
  auto free_all = [&] {
    for (int p = 0; p < world; ++p) cudaFree(h[world + p]);
    cudaFree(table);
    cudaFree(epoch);
    cudaFree(workspace);
  };
  try {
    if (workspace_bytes > 0) XSTAGE_CUDA_CHECK(cudaMalloc(&workspace, workspace_bytes));
    for (int p = 0; p < world; ++p) {
      h[p] = owner_out[p];
      XSTAGE_CUDA_CHECK(cudaMalloc(&h[world + p], kFlagBytes));
      XSTAGE_CUDA_CHECK(cudaMemsetAsync(h[world + p], 0, kFlagBytes, stream));
    }
    XSTAGE_CUDA_CHECK(cudaMalloc(&table, sizeof(void*) * h.size()));
    XSTAGE_CUDA_CHECK(cudaMemcpy(table, h.data(), sizeof(void*) * h.size(), cudaMemcpyHostToDevice));
    XSTAGE_CUDA_CHECK(cudaMalloc(&epoch, sizeof(uint32_t)));
    XSTAGE_CUDA_CHECK(cudaMemsetAsync(epoch, 0, sizeof(uint32_t), stream));
    const A2AEpilogueParams ep = attn::ulysses_epilogue_params(rank, world, seq, hl, head_dim, precision, kOrder, table, epoch);
    AttnForwardArgs fa{prob, q, k, v, nullptr, nullptr};
    fa.precision = precision;
    fa.workspace = workspace;
    fa.workspace_bytes = workspace_bytes;
    result = attn::attn_fused_a2a_can_implement(fa, ep);
    if (result.empty()) {
      XSTAGE_CUDA_CHECK(attn::attn_forward_fused_a2a(fa, ep, kEpilogue, stream));
      XSTAGE_CUDA_CHECK(cudaStreamSynchronize(stream));
      std::vector<uint32_t> f(static_cast<std::size_t>(grid));
      for (int p = 0; p < world && result.empty(); ++p) {
        XSTAGE_CUDA_CHECK(cudaMemcpy(f.data(), static_cast<uint32_t*>(h[world + p]) + rank * attn::kA2AMaxCtas,
                                     f.size() * sizeof(uint32_t), cudaMemcpyDeviceToHost));
        for (int c = 0; c < grid; ++c) {
          if (f[c] != 1) {
            result = "owner " + std::to_string(p) + ": flag of CTA " + std::to_string(c) + " is " + std::to_string(f[c]) +
                     " (expected 1)";
            break;
          }
        }
      }
    }
  } catch (...) {
    free_all();
    throw;
  }
  free_all();
  return result;
}

}  // namespace testing

}  // namespace xstage::ulysses
