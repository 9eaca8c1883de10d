// Host launcher of the attention forward kernel: validates the problem, builds the TMA descriptors
// and launches the persistent grid. One kernel instantiation per supported head dimension.
#include "attn_forward.hpp"

#include "attn_epilogue_local.cuh"
#include "attn_fp8_quant.hpp"
#include "attn_launch.cuh"
#include "xstage/sched/attn_tile_config.hpp"
#include "xstage/sched/attn_tile_scheduler.hpp"
#include "xstage/sched/attn_tuning.hpp"

namespace xstage::attn {

AttnForwardProblem make_bshd_problem(int batch, int seq_q, int seq_k, int heads, int head_dim) {
  AttnForwardProblem p;
  p.batch = batch;
  p.seq_q = seq_q;
  p.seq_k = seq_k;
  p.heads = heads;
  p.head_dim = head_dim;
  const int64_t row = int64_t(heads) * head_dim;
  p.q_stride_seq = p.o_stride_seq = row;
  p.q_stride_head = p.o_stride_head = head_dim;
  p.q_stride_batch = p.o_stride_batch = row * seq_q;
  p.k_stride_seq = p.v_stride_seq = row;
  p.k_stride_head = p.v_stride_head = head_dim;
  p.k_stride_batch = p.v_stride_batch = row * seq_k;
  return p;
}

const char* attn_precision_name(AttnPrecision precision) {
  switch (precision) {
    case AttnPrecision::kBf16:
      return "bf16";
    case AttnPrecision::kFp8:
      return "fp8";
  }
  return nullptr;
}

bool attn_precision_from_name(const std::string& name, AttnPrecision* precision) {
  for (AttnPrecision c : {AttnPrecision::kBf16, AttnPrecision::kFp8}) {
    if (name == attn_precision_name(c)) {
      *precision = c;
      return true;
    }
  }
  return false;
}

namespace {

// The local forward's tiles: the tile table's, with a tuning build's block_n, GEMM turns and cluster size
// (xstage/sched/attn_tuning.hpp).
template <int HeadDim>
inline constexpr sched::AttnTileConfig kLaunchConfig = [] {
  sched::AttnTileConfig c = sched::attn_tile_config(HeadDim);
  if (sched::kAttnTuneBlockN > 0) c.block_n = sched::kAttnTuneBlockN;
  if (sched::kAttnTuneWgOrder >= 0) c.wg_gemm_order = sched::kAttnTuneWgOrder != 0;
  if (sched::kAttnTuneClusterM > 0) c.cluster_m = sched::kAttnTuneClusterM;
  return c;
}();
template <int HeadDim>
using LaunchTraits = AttnKernelTraits<HeadDim, kLaunchConfig<HeadDim>.block_n, kLaunchConfig<HeadDim>.kv_stages,
                                      kLaunchConfig<HeadDim>.wg_gemm_order>;
// Whole tiles in clusters of cluster_m CTAs (LaunchTraits itself where that is 1).
template <int HeadDim>
using ClusterLaunchTraits =
    AttnKernelTraits<HeadDim, kLaunchConfig<HeadDim>.block_n, kLaunchConfig<HeadDim>.kv_stages,
                     kLaunchConfig<HeadDim>.wg_gemm_order, false, kLaunchConfig<HeadDim>.cluster_m>;

// The bf16 split tail's workspace on the current device (0 without a device, or when nothing splits).
size_t split_bytes(const AttnForwardProblem& p) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 0;
  if (p.head_dim == 64) return attn_split_workspace_bytes<LaunchTraits<64>>(p, device);
  if (p.head_dim == 128) return attn_split_workspace_bytes<LaunchTraits<128>>(p, device);
  return 0;
}

}  // namespace

size_t attn_forward_workspace_bytes(const AttnForwardProblem& p, AttnPrecision precision, AttnTail tail) {
  if (precision == AttnPrecision::kFp8) return fp8_workspace_layout(p).bytes;
  return tail == AttnTail::kSplit ? split_bytes(p) : 0;
}

double attn_forward_flops(const AttnForwardProblem& p) {
  return 4.0 * p.batch * p.heads * double(p.seq_q) * double(p.seq_k) * p.head_dim;
}

std::string attn_forward_can_implement(const AttnForwardArgs& a) {
  const AttnForwardProblem& p = a.problem;
  if (!sched::attn_head_dim_supported(p.head_dim)) return "head_dim " + std::to_string(p.head_dim) + " (supported: 64, 128)";
  if (p.batch < 1) return "batch " + std::to_string(p.batch);
  if (p.heads < 1) return "heads " + std::to_string(p.heads);
  if (p.seq_q < 1) return "seq_q " + std::to_string(p.seq_q);
  if (p.seq_k < 1) return "seq_k " + std::to_string(p.seq_k);
  if (!a.q || !a.k || !a.v || !a.o) return "null q, k, v or o pointer";
  if (attn_precision_name(a.precision) == nullptr) {
    return "precision " + std::to_string(int(a.precision)) + " (accepted: bf16, fp8)";
  }
  if (a.precision == AttnPrecision::kFp8) {
    if (p.head_dim != kFp8HeadDim) {
      return "head_dim " + std::to_string(p.head_dim) + " with precision fp8 (supported: " +
             std::to_string(kFp8HeadDim) + ")";
    }
    const size_t need = fp8_workspace_layout(p).bytes;
    if (a.workspace == nullptr) return "precision fp8 needs a workspace of " + std::to_string(need) + " bytes (null)";
    if (a.workspace_bytes < need) {
      return "workspace_bytes " + std::to_string(a.workspace_bytes) + " (precision fp8 needs " + std::to_string(need) +
             ")";
    }
  } else if (a.workspace != nullptr) {
    // bf16: optional; given, it must hold the split tail's partials (or the schedule must not split).
    const size_t need = split_bytes(p);
    if (a.workspace_bytes < need) {
      return "workspace_bytes " + std::to_string(a.workspace_bytes) + " (precision bf16 with a workspace needs " +
             std::to_string(need) + ", or no workspace)";
    }
  }
  if (a.workspace != nullptr && reinterpret_cast<uintptr_t>(a.workspace) % sched::kAttnFp8WorkspaceAlign != 0) {
    return "workspace pointer not " + std::to_string(sched::kAttnFp8WorkspaceAlign) + "-byte aligned";
  }
  // TMA: global addresses 16-byte aligned, strides multiples of 16 bytes (8 bf16 elements).
  const int64_t strides[] = {p.q_stride_batch, p.q_stride_seq, p.q_stride_head, p.k_stride_batch,
                             p.k_stride_seq,   p.k_stride_head, p.v_stride_batch, p.v_stride_seq,
                             p.v_stride_head,  p.o_stride_seq,  p.o_stride_head,  p.o_stride_batch};
  for (int64_t s : strides) {
    if (s <= 0 || s % 8 != 0) return "stride " + std::to_string(s) + " (need a positive multiple of 8 elements)";
  }
  for (const void* ptr : {a.q, a.k, a.v, static_cast<const void*>(a.o)}) {
    if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0) return "pointer not 16-byte aligned";
  }
  return {};
}

namespace {

template <class Traits>
typename AttnEpilogueLocal<Traits>::Params local_epilogue_params(const AttnForwardArgs& a) {
  const AttnForwardProblem& p = a.problem;
  return {static_cast<typename Traits::Element*>(a.o), p.o_stride_batch, p.o_stride_seq, p.o_stride_head, a.lse,
          p.seq_q, p.heads};
}

template <int HeadDim>
cudaError_t launch(const AttnForwardArgs& a, cudaStream_t stream) {
  using Traits = LaunchTraits<HeadDim>;
  using PairTraits = ClusterLaunchTraits<HeadDim>;
  if constexpr (PairTraits::kClusterM > 1) {
    // Whole tiles run in CTA pairs; a tail the schedule splits (a workspace given, checked by
    // attn_forward_can_implement) runs the split kernel on single CTAs.
    bool split = false;
    if (a.workspace != nullptr) {
      int device = 0, grid = 0;
      cudaError_t e = cudaGetDevice(&device);
      if (e == cudaSuccess) e = attn_grid_size<Traits>(a.problem, device, &grid);
      if (e != cudaSuccess) return e;
      split = attn_local_schedule<Traits>(a.problem, grid, true).split();
    }
    if (!split) {
      return attn_launch_with_epilogue<PairTraits, AttnEpilogueLocal<PairTraits>>(
          a, local_epilogue_params<PairTraits>(a), stream);
    }
  }
  // A workspace (checked: attn_forward_can_implement) splits the schedule's tail where that pays.
  return attn_launch_with_epilogue<Traits, AttnEpilogueLocal<Traits>, /*kAllowSplit=*/true>(
      a, local_epilogue_params<Traits>(a), stream, 0, a.workspace);
}

}  // namespace

cudaError_t attn_forward(const AttnForwardArgs& args, cudaStream_t stream) {
  if (!attn_forward_can_implement(args).empty()) return cudaErrorInvalidValue;
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return e;
  AttnDeviceInfo info;
  if ((e = attn_device_info(device, &info)) != cudaSuccess) return e;
  if (info.cc_major != 9 || info.cc_minor != 0) return cudaErrorNoKernelImageForDevice;  // wgmma/setmaxnreg need sm_90a
  if (args.precision == AttnPrecision::kFp8) return attn_forward_fp8_local(args, stream);
  if (args.problem.head_dim == 64) return launch<64>(args, stream);
  return launch<128>(args, stream);
}

}  // namespace xstage::attn
