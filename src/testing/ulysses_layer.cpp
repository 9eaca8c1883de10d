// Ulysses attention layer: buffers, symmetric window, NCCL baselines and the variants' launch order.
#include "xstage/testing/ulysses_layer.hpp"

#include <nccl.h>

#include <algorithm>
#include <stdexcept>

#include "attn_forward.hpp"
#include "xstage/testing/attn_random.hpp"
#include "ulysses_kernels.hpp"
#include "xstage/sched/attn_tile_config.hpp"
#include "xstage/comm/window.hpp"
#include "xstage/gpu/check.hpp"

namespace xstage::attn {

const char* to_string(UlyssesVariant v) {
  switch (v) {
    case UlyssesVariant::kFaOnly: return "fa-only";
    case UlyssesVariant::kA2AOurs: return "a2a-ours";
    case UlyssesVariant::kA2ANccl: return "a2a-nccl";
    case UlyssesVariant::kSerialOurs: return "serial-ours";
    case UlyssesVariant::kSerialNccl: return "serial-nccl";
    case UlyssesVariant::kFusedTma: return "fused-tma";
    case UlyssesVariant::kCoupledTma: return "coupled-tma";
    case UlyssesVariant::kFaOnlyTma: return "fa-only-tma";
    case UlyssesVariant::kSerialTma: return "serial-tma";
  }
  return "?";
}

std::vector<UlyssesVariant> all_ulysses_variants() {
  return {UlyssesVariant::kFaOnly,     UlyssesVariant::kA2AOurs,    UlyssesVariant::kA2ANccl,
          UlyssesVariant::kSerialOurs, UlyssesVariant::kSerialNccl, UlyssesVariant::kFusedTma,
          UlyssesVariant::kCoupledTma, UlyssesVariant::kFaOnlyTma, UlyssesVariant::kSerialTma};
}

std::vector<UlyssesVariant> fused_ulysses_variants() {
  std::vector<UlyssesVariant> v;
  for (UlyssesVariant x : all_ulysses_variants())
    if (ulysses_variant_is_fused(x)) v.push_back(x);
  return v;
}

bool ulysses_variant_is_fused(UlyssesVariant v) {
  switch (v) {
    case UlyssesVariant::kFusedTma:
    case UlyssesVariant::kCoupledTma: return true;
    default: return false;
  }
}

std::string ulysses_variant_names() {
  std::string s;
  for (UlyssesVariant v : all_ulysses_variants()) s += std::string(s.empty() ? "" : ", ") + to_string(v);
  return s;
}

bool parse_ulysses_variant(const std::string& s, UlyssesVariant* out) {
  return parse_by_name(s, all_ulysses_variants(), out);
}

cudaError_t record_timing_event(cudaEvent_t event, cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaError_t e = cudaStreamIsCapturing(stream, &status);
  if (e != cudaSuccess) return e;
  return status == cudaStreamCaptureStatusActive ? cudaEventRecordWithFlags(event, stream, cudaEventRecordExternal)
                                                 : cudaEventRecord(event, stream);
}

int UlyssesLayer::first_m_blocks(int rank) const {
  if (cfg_.tile_order != UlyssesTileOrder::kRemoteFirst) return 0;
  return a2a_remote_m_blocks(cfg_.seq, world_, rank, block_m());
}

int64_t UlyssesLayer::final_round_remote_bytes(int rank) const {
  const int block_m = this->block_m();
  const sched::AttnTileScheduler s(cfg_.seq, block_m, cfg_.heads_per_gpu, 1, first_m_blocks(rank));
  return a2a_final_round_remote_bytes(s, fused_grid_, block_m, cfg_.seq, world_, rank, row_rotation(rank), cfg_.head_dim);
}

std::string ulysses_config_error(const UlyssesConfig& c, int world) {
  if (world < 1 || world > kA2AMaxRanks) return "world size " + std::to_string(world) + " (1.." + std::to_string(kA2AMaxRanks) + ")";
  if (attn_precision_name(c.precision) == nullptr)
    return "precision " + std::to_string(int(c.precision)) + " (accepted: bf16, fp8)";
  // The fused kernels of both precisions are built for head_dim 128 (the check below); the fp8 case says so.
  if (c.precision == AttnPrecision::kFp8 && c.head_dim != 128)
    return "precision fp8: head_dim " + std::to_string(c.head_dim) + " (the FP8 fused kernels support 128)";
  if (c.head_dim != 128) return "head_dim " + std::to_string(c.head_dim) + " (the fused kernels support 128)";
  if (c.heads_per_gpu < 1) return "heads " + std::to_string(c.heads_per_gpu);
  if (c.text < 0) return "text " + std::to_string(c.text);
  if (c.seq < world || a2a_local_len(c.seq, world, world - 1) < 1)
    return "seq " + std::to_string(c.seq) + " (every one of the " + std::to_string(world) + " ranks needs a non-empty shard)";
  if (int64_t(c.seq) * c.heads_per_gpu * world * c.head_dim > (int64_t(1) << 40))
    return "seq " + std::to_string(c.seq) + " (output larger than 2^40 elements)";
  if (c.text >= c.seq) return "text " + std::to_string(c.text) + " (must be below seq " + std::to_string(c.seq) + ")";
  return {};
}

namespace {
constexpr std::size_t kAlign = 4096;
// First kernel row of owner p's shard under rotation `rot` (a2a_rotated_shard_start).
std::size_t rotated_shard_start(int p, int shard, int rot, int seq) {
  return std::size_t(a2a_rotated_shard_start(p, shard, rot, seq));
}
std::size_t align_up(std::size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }
constexpr std::size_t kFlagBytes = sizeof(uint32_t) * kA2AMaxRanks * kA2AMaxCtas;
}  // namespace

struct UlyssesLayer::Impl {
  std::unique_ptr<comm::SymmetricWindow> window;
  std::unique_ptr<comm::PeerBuffers> peers;
  std::size_t out_bytes = 0;  // region of the output at offset 0 of each rank's buffer; flags after it
  struct Rank {
    int rank = 0, device = 0;
    cudaStream_t stream = nullptr;
    ncclComm_t comm = nullptr;
    uint16_t *x[3] = {}, *pack[3] = {}, *qkv[3] = {};
    uint16_t *o_local = nullptr, *recv = nullptr;
    uint16_t* out = nullptr;
    uint32_t* flags = nullptr;
    uint32_t* epoch = nullptr;
    void** d_table = nullptr;  // [dst x world, flags x world] as this GPU reaches them
    A2AEpilogueParams ep{};
    // fa-only-tma: the fused-tma kernel with a one-rank parameter block whose only owner is o_local
    // ([seq, heads_per_gpu, d], kernel row order): the same SASS as fused-tma, every store local.
    uint32_t* local_flags = nullptr;  // written (flags of a one-rank team), never waited on
    uint32_t* local_epoch = nullptr;
    void** local_table = nullptr;     // [o_local, local_flags]
    A2AEpilogueParams ep_local{};
    void* workspace = nullptr;  // the FP8 pre-pass's (precision fp8): every variant's, one at a time on `stream`
    std::size_t workspace_bytes = 0;
  };
  std::vector<Rank> ranks;
  // Every attention call of the layer at the configured precision.
  static AttnForwardArgs args(const UlyssesConfig& c, const Rank& R, void* o) {
    AttnForwardArgs a{make_bshd_problem(1, c.seq, c.seq, c.heads_per_gpu, c.head_dim), R.qkv[0], R.qkv[1], R.qkv[2], o,
                      nullptr};
    a.precision = c.precision;
    a.workspace = R.workspace;
    a.workspace_bytes = R.workspace_bytes;
    return a;
  }
};

UlyssesLayer::UlyssesLayer(comm::Team& team, const UlyssesConfig& cfg)
    : team_(team), cfg_(cfg), world_(team.world_size()), impl_(std::make_unique<Impl>()) {
  const std::string err = ulysses_config_error(cfg, world_);
  if (!err.empty()) throw std::invalid_argument(err);
  const int hl = cfg.heads_per_gpu, d = cfg.head_dim, n = world_;
  const int shard = a2a_shard_len(cfg.seq, n);
  impl_->out_bytes = align_up(std::size_t(shard) * heads_total() * d * 2);
  const std::size_t buf_bytes = impl_->out_bytes + align_up(kFlagBytes);
  if (cfg.store_path == UlyssesStorePath::kNcclWindow) {
    impl_->window = std::make_unique<comm::SymmetricWindow>(team, buf_bytes, 1);
  } else {
    impl_->peers = std::make_unique<comm::PeerBuffers>(team, buf_bytes);
  }
  auto& locals = team.local_ranks();
  impl_->ranks.resize(locals.size());
  for (std::size_t i = 0; i < locals.size(); ++i) {
    auto& R = impl_->ranks[i];
    R.rank = locals[i].rank;
    R.device = locals[i].device;
    R.stream = locals[i].stream;
    R.comm = locals[i].comm;
    XSTAGE_CUDA_CHECK(cudaSetDevice(R.device));
    const std::size_t s_r = std::size_t(local_len(R.rank));
    const std::size_t full = std::size_t(cfg.seq) * hl * d;
    for (int t = 0; t < 3; ++t) {
      XSTAGE_CUDA_CHECK(cudaMalloc(&R.x[t], std::max<std::size_t>(s_r * heads_total() * d * 2, 16)));
      XSTAGE_CUDA_CHECK(cudaMalloc(&R.pack[t], std::max<std::size_t>(std::size_t(n) * s_r * hl * d * 2, 16)));
      XSTAGE_CUDA_CHECK(cudaMalloc(&R.qkv[t], full * 2));
    }
    XSTAGE_CUDA_CHECK(cudaMalloc(&R.o_local, full * 2));
    XSTAGE_CUDA_CHECK(cudaMalloc(&R.recv, std::max<std::size_t>(std::size_t(n) * s_r * hl * d * 2, 16)));
    XSTAGE_CUDA_CHECK(cudaMalloc(&R.epoch, sizeof(uint32_t)));
    XSTAGE_CUDA_CHECK(cudaMemset(R.epoch, 0, sizeof(uint32_t)));
    R.workspace_bytes =
        attn_forward_workspace_bytes(make_bshd_problem(1, cfg.seq, cfg.seq, hl, d), cfg.precision, AttnTail::kWhole);
    if (R.workspace_bytes > 0) XSTAGE_CUDA_CHECK(cudaMalloc(&R.workspace, R.workspace_bytes));
    char* base = impl_->window ? static_cast<char*>(impl_->window->local_ptr(int(i)))
                               : static_cast<char*>(impl_->peers->ptr(R.rank));
    R.out = reinterpret_cast<uint16_t*>(base);
    R.flags = reinterpret_cast<uint32_t*>(base + impl_->out_bytes);
    XSTAGE_CUDA_CHECK(cudaMemset(R.flags, 0, kFlagBytes));

    // The peers' buffers as this GPU reaches them.
    std::vector<void*> h(2 * n);
    if (impl_->window) {
      h = ulysses_window_owner_table(*impl_->window, int(i), n, impl_->out_bytes, R.stream);
    } else {
      for (int p = 0; p < n; ++p) {
        char* pb = static_cast<char*>(impl_->peers->ptr(p));
        h[p] = pb;
        h[n + p] = pb + impl_->out_bytes;
      }
    }
    for (int p = 0; p < n; ++p) {
      if (!h[p] || !h[n + p] || reinterpret_cast<uintptr_t>(h[p]) % 16 != 0)
        throw std::runtime_error("ulysses: unusable peer pointer for rank " + std::to_string(p));
    }
    XSTAGE_CUDA_CHECK(cudaMalloc(&R.d_table, sizeof(void*) * 2 * n));
    XSTAGE_CUDA_CHECK(cudaMemcpy(R.d_table, h.data(), sizeof(void*) * 2 * n, cudaMemcpyHostToDevice));
    A2AEpilogueParams& ep = R.ep;
    ep = ulysses_epilogue_params(R.rank, n, cfg.seq, hl, d, cfg.precision, cfg.tile_order, R.d_table, R.epoch);
    AttnForwardProblem prob = make_bshd_problem(1, cfg.seq, cfg.seq, hl, d);
    fused_grid_ = attn_fused_a2a_grid(prob, R.device, cfg.precision);
    int sms = 0;
    XSTAGE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, R.device));
    a2a_grid_ = std::min(2 * sms, kA2AMaxCtas);
    const AttnForwardArgs probe_args = Impl::args(cfg, R, nullptr);
    if (std::string why = attn_forward_can_implement(Impl::args(cfg, R, R.o_local)); !why.empty())
      throw std::invalid_argument("attention: " + why);
    const std::string why = attn_fused_a2a_can_implement(probe_args, ep);
    if (!why.empty()) throw std::invalid_argument("fused attention: " + why);

    XSTAGE_CUDA_CHECK(cudaMalloc(&R.local_flags, kFlagBytes));
    XSTAGE_CUDA_CHECK(cudaMemset(R.local_flags, 0, kFlagBytes));
    XSTAGE_CUDA_CHECK(cudaMalloc(&R.local_epoch, sizeof(uint32_t)));
    XSTAGE_CUDA_CHECK(cudaMemset(R.local_epoch, 0, sizeof(uint32_t)));
    void* lt[2] = {R.o_local, R.local_flags};
    XSTAGE_CUDA_CHECK(cudaMalloc(&R.local_table, sizeof(lt)));
    XSTAGE_CUDA_CHECK(cudaMemcpy(R.local_table, lt, sizeof(lt), cudaMemcpyHostToDevice));
    A2AEpilogueParams& el = R.ep_local;
    el = ep;
    el.rank = 0;
    el.world = 1;
    el.shard_len = a2a_shard_len(cfg.seq, 1);
    el.heads_total = hl;
    el.head_offset = 0;
    el.row_rotation = 0;  // o_local keeps the kernel's row order, like the local epilogue
    // el.first_m_blocks stays ep's: fa-only-tma runs fused-tma's tile schedule.
    el.epoch = R.local_epoch;
    el.dst = R.local_table;
    el.flags = reinterpret_cast<uint32_t* const*>(R.local_table + 1);
    const std::string why_local = attn_fused_a2a_can_implement(probe_args, el);
    if (!why_local.empty()) throw std::invalid_argument("fused attention, local parameters: " + why_local);
  }
  if (fused_grid_ < 1 || fused_grid_ > kA2AMaxCtas) throw std::invalid_argument("fused grid out of range");
  for (auto& R : impl_->ranks) {
    XSTAGE_CUDA_CHECK(cudaSetDevice(R.device));
    XSTAGE_CUDA_CHECK(cudaDeviceSynchronize());
  }
  team.barrier();  // every rank's flags are zero before any peer may publish into them
}

UlyssesLayer::~UlyssesLayer() {
  for (auto& R : impl_->ranks) {
    cudaSetDevice(R.device);
    cudaDeviceSynchronize();
    for (int t = 0; t < 3; ++t) {
      cudaFree(R.x[t]);
      cudaFree(R.pack[t]);
      cudaFree(R.qkv[t]);
    }
    cudaFree(R.o_local);
    cudaFree(R.recv);
    cudaFree(R.epoch);
    cudaFree(R.d_table);
    cudaFree(R.local_flags);
    cudaFree(R.local_epoch);
    cudaFree(R.local_table);
    cudaFree(R.workspace);
  }
}

int64_t UlyssesLayer::remote_bytes_per_rank(int rank) const {
  return (int64_t(cfg_.seq) - local_len(rank)) * cfg_.heads_per_gpu * cfg_.head_dim * 2;
}

void UlyssesLayer::fill_inputs(uint64_t seed) {
  for (auto& R : impl_->ranks) {
    XSTAGE_CUDA_CHECK(cudaSetDevice(R.device));
    const std::size_t n = std::size_t(local_len(R.rank)) * heads_total() * cfg_.head_dim;
    for (int t = 0; t < 3; ++t)
      XSTAGE_CUDA_CHECK(attn_fill_normal_bf16(R.x[t], n, seed * 1315423911ull + uint64_t(R.rank) * 3 + t, 1.0f, R.stream));
  }
}

void UlyssesLayer::pre_attention_a2a() {
  const int hl = cfg_.heads_per_gpu, d = cfg_.head_dim, n = world_;
  const int shard = a2a_shard_len(cfg_.seq, n);
  for (auto& R : impl_->ranks) {
    XSTAGE_CUDA_CHECK(cudaSetDevice(R.device));
    for (int t = 0; t < 3; ++t)
      XSTAGE_CUDA_CHECK(head_block_copy(R.pack[t], R.x[t], n, local_len(R.rank), hl, d, true, R.stream));
  }
  XSTAGE_NCCL_CHECK(ncclGroupStart());
  for (auto& R : impl_->ranks) {
    const std::size_t s_r = std::size_t(local_len(R.rank));
    for (int t = 0; t < 3; ++t) {
      for (int p = 0; p < n; ++p) {
        XSTAGE_NCCL_CHECK(ncclSend(R.pack[t] + std::size_t(p) * s_r * hl * d, s_r * hl * d, ncclBfloat16, p, R.comm, R.stream));
        // Q in this rank's rotated query order; K and V in sequence order.
        const std::size_t row = t == 0 ? rotated_shard_start(p, shard, row_rotation(R.rank), cfg_.seq) : std::size_t(p) * shard;
        XSTAGE_NCCL_CHECK(ncclRecv(R.qkv[t] + row * hl * d, std::size_t(local_len(p)) * hl * d, ncclBfloat16, p, R.comm,
                                   R.stream));
      }
    }
  }
  XSTAGE_NCCL_CHECK(ncclGroupEnd());
}

void UlyssesLayer::poison_outputs() {
  for (auto& R : impl_->ranks) {
    XSTAGE_CUDA_CHECK(cudaSetDevice(R.device));
    XSTAGE_CUDA_CHECK(cudaMemsetAsync(R.out, 0xFF, std::size_t(local_len(R.rank)) * heads_total() * cfg_.head_dim * 2, R.stream));
    XSTAGE_CUDA_CHECK(cudaMemsetAsync(R.o_local, 0xFF, std::size_t(cfg_.seq) * cfg_.heads_per_gpu * cfg_.head_dim * 2, R.stream));
  }
  synchronize();
  team_.barrier();
}

void UlyssesLayer::nccl_post_a2a() {
  const int hl = cfg_.heads_per_gpu, d = cfg_.head_dim, n = world_;
  const int shard = a2a_shard_len(cfg_.seq, n);
  XSTAGE_NCCL_CHECK(ncclGroupStart());
  for (auto& R : impl_->ranks) {
    const std::size_t s_r = std::size_t(local_len(R.rank));
    for (int p = 0; p < n; ++p) {
      const std::size_t row = rotated_shard_start(p, shard, row_rotation(R.rank), cfg_.seq);
      XSTAGE_NCCL_CHECK(ncclSend(R.o_local + row * hl * d, std::size_t(local_len(p)) * hl * d, ncclBfloat16, p, R.comm,
                                 R.stream));
      XSTAGE_NCCL_CHECK(ncclRecv(R.recv + std::size_t(p) * s_r * hl * d, s_r * hl * d, ncclBfloat16, p, R.comm, R.stream));
    }
  }
  XSTAGE_NCCL_CHECK(ncclGroupEnd());
  for (auto& R : impl_->ranks) {
    XSTAGE_CUDA_CHECK(cudaSetDevice(R.device));
    XSTAGE_CUDA_CHECK(head_block_copy(R.recv, R.out, n, local_len(R.rank), hl, d, false, R.stream));
  }
}

void UlyssesLayer::enqueue(UlyssesVariant v, const std::vector<cudaEvent_t>& sender_done) {
  const int hl = cfg_.heads_per_gpu, d = cfg_.head_dim;
  const bool attention = v == UlyssesVariant::kFaOnly || v == UlyssesVariant::kSerialOurs || v == UlyssesVariant::kSerialNccl;
  const bool attention_tma = v == UlyssesVariant::kFaOnlyTma || v == UlyssesVariant::kSerialTma;
  const bool ours = v == UlyssesVariant::kA2AOurs || v == UlyssesVariant::kSerialOurs || v == UlyssesVariant::kSerialTma;
  const bool nccl = v == UlyssesVariant::kA2ANccl || v == UlyssesVariant::kSerialNccl;
  const bool fused = ulysses_variant_is_fused(v);
  for (auto& R : impl_->ranks) {
    XSTAGE_CUDA_CHECK(cudaSetDevice(R.device));
    if (attention) XSTAGE_CUDA_CHECK(attn_forward(Impl::args(cfg_, R, R.o_local), R.stream));
    if (attention_tma) {
      XSTAGE_CUDA_CHECK(
          attn_forward_fused_a2a(Impl::args(cfg_, R, nullptr), R.ep_local, FusedEpilogue::kPiggybackTma, R.stream));
    }
    if (fused) {
      const AttnForwardArgs a = Impl::args(cfg_, R, nullptr);
      const FusedEpilogue mode =
          v == UlyssesVariant::kCoupledTma ? FusedEpilogue::kCompletionCoupledTma : FusedEpilogue::kPiggybackTma;
      XSTAGE_CUDA_CHECK(attn_forward_fused_a2a(a, R.ep, mode, R.stream));
    }
    if (ours) XSTAGE_CUDA_CHECK(a2a_remote_store(R.o_local, R.ep, hl, d, a2a_grid_, R.stream));
  }
  if (nccl) nccl_post_a2a();
  for (std::size_t i = 0; i < impl_->ranks.size(); ++i) {
    auto& R = impl_->ranks[i];
    XSTAGE_CUDA_CHECK(cudaSetDevice(R.device));
    if (!sender_done.empty()) XSTAGE_CUDA_CHECK(record_timing_event(sender_done[i], R.stream));
    if (ours || fused) {
      XSTAGE_CUDA_CHECK(a2a_wait(R.flags, R.epoch, world_, ours ? a2a_grid_ : fused_grid_, R.rank, cfg_.wait_timeout_ns,
                                 R.stream));
    }
  }
}

void UlyssesLayer::synchronize() {
  for (auto& R : impl_->ranks) {
    XSTAGE_CUDA_CHECK(cudaSetDevice(R.device));
    XSTAGE_CUDA_CHECK(cudaStreamSynchronize(R.stream));
  }
}

std::vector<uint16_t> UlyssesLayer::read_output(int local_index) {
  auto& R = impl_->ranks.at(local_index);
  std::vector<uint16_t> h(std::size_t(local_len(R.rank)) * heads_total() * cfg_.head_dim);
  XSTAGE_CUDA_CHECK(cudaSetDevice(R.device));
  XSTAGE_CUDA_CHECK(cudaStreamSynchronize(R.stream));
  XSTAGE_CUDA_CHECK(cudaMemcpy(h.data(), R.out, h.size() * 2, cudaMemcpyDeviceToHost));
  return h;
}

std::vector<std::vector<uint16_t>> UlyssesLayer::run_and_read_outputs(UlyssesVariant v) {
  poison_outputs();
  enqueue(v);
  synchronize();
  std::vector<std::vector<uint16_t>> out(impl_->ranks.size());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = read_output(static_cast<int>(i));
  return out;
}

std::vector<uint16_t> UlyssesLayer::read_local_attention(int local_index) {
  auto& R = impl_->ranks.at(local_index);
  std::vector<uint16_t> h(std::size_t(cfg_.seq) * cfg_.heads_per_gpu * cfg_.head_dim);
  XSTAGE_CUDA_CHECK(cudaSetDevice(R.device));
  XSTAGE_CUDA_CHECK(cudaStreamSynchronize(R.stream));
  XSTAGE_CUDA_CHECK(cudaMemcpy(h.data(), R.o_local, h.size() * 2, cudaMemcpyDeviceToHost));
  return h;
}

std::vector<uint16_t> UlyssesLayer::read_qkv(int local_index, int which) {
  auto& R = impl_->ranks.at(local_index);
  std::vector<uint16_t> h(std::size_t(cfg_.seq) * cfg_.heads_per_gpu * cfg_.head_dim);
  XSTAGE_CUDA_CHECK(cudaSetDevice(R.device));
  XSTAGE_CUDA_CHECK(cudaStreamSynchronize(R.stream));
  XSTAGE_CUDA_CHECK(cudaMemcpy(h.data(), R.qkv[which], h.size() * 2, cudaMemcpyDeviceToHost));
  return h;
}

}  // namespace xstage::attn

namespace xstage::attn {
std::vector<uint16_t> UlyssesLayer::read_input(int local_index, int which) {
  auto& R = impl_->ranks.at(local_index);
  std::vector<uint16_t> h(std::size_t(local_len(R.rank)) * heads_total() * cfg_.head_dim);
  XSTAGE_CUDA_CHECK(cudaSetDevice(R.device));
  XSTAGE_CUDA_CHECK(cudaStreamSynchronize(R.stream));
  XSTAGE_CUDA_CHECK(cudaMemcpy(h.data(), R.x[which], h.size() * 2, cudaMemcpyDeviceToHost));
  return h;
}
}  // namespace xstage::attn
