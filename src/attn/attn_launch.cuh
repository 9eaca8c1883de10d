// Launch of the attention forward kernel with any epilogue policy: mainloop parameters (TMA
// descriptors) from the problem, the persistent grid, the dynamic shared-memory attribute. Used by the
// local path (attn_forward.cu) and the fused Ulysses launchers.
#pragma once

#if !defined(XSTAGE_ATTN_TMA_ENCODE_CACHED)
#error "attention launchers are compiled with -include attn_tma_encode.hpp (src/attn/CMakeLists.txt)"
#endif

#include <cmath>
#include <type_traits>

#include <cuda_runtime_api.h>

#include "attn_forward.hpp"
#include "attn_fp8_quant.hpp"
#include "attn_kernel.cuh"
#include "attn_split.cuh"
#include "xstage/gpu/launch_attr.hpp"
#include "xstage/sched/attn_tile_config.hpp"
#include "xstage/sched/attn_tile_scheduler.hpp"

namespace xstage::attn {

// What a launch needs to know about a device, queried once per device: attributes do not change
// while the process runs, and a launch from Python should cost no attribute queries.
struct AttnDeviceInfo {
  int num_sms = 0;
  int cc_major = 0;
  int cc_minor = 0;
};

inline cudaError_t attn_device_info(int device, AttnDeviceInfo* info) {
  constexpr int kMaxDevices = 64;
  static std::once_flag once[kMaxDevices];
  static AttnDeviceInfo cached[kMaxDevices];
  static cudaError_t error[kMaxDevices] = {};
  if (device < 0 || device >= kMaxDevices) return cudaErrorInvalidDevice;
  std::call_once(once[device], [device] {
    AttnDeviceInfo& d = cached[device];
    cudaError_t& e = error[device];
    e = cudaDeviceGetAttribute(&d.num_sms, cudaDevAttrMultiProcessorCount, device);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&d.cc_major, cudaDevAttrComputeCapabilityMajor, device);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&d.cc_minor, cudaDevAttrComputeCapabilityMinor, device);
  });
  *info = cached[device];
  return error[device];
}

// Grid of the persistent kernel for this problem on `device` (one CTA per SM, at most one per tile).
template <class Traits>
inline cudaError_t attn_grid_size(const AttnForwardProblem& p, int device, int* grid) {
  AttnDeviceInfo info;
  const cudaError_t e = attn_device_info(device, &info);
  if (e != cudaSuccess) return e;
  const int num_sms = info.num_sms;
  *grid = sched::AttnTileScheduler::grid_size(sched::AttnTileScheduler(p.seq_q, Traits::kBlockM, p.heads, p.batch).num_tiles(),
                                              num_sms);
  return cudaSuccess;
}

// The local forward's schedule on a grid of `grid` CTAs: whole tiles, with the tail split when the cost
// model says it shortens the kernel (sched::AttnTileScheduler::with_split_tail) and split is allowed.
template <class Traits>
inline sched::AttnTileScheduler attn_local_schedule(const AttnForwardProblem& p, int grid, bool split) {
  const sched::AttnTileScheduler whole(p.seq_q, Traits::kBlockM, p.heads, p.batch);
  if (!split) return whole;
  return whole.with_split_tail(grid, (p.seq_k + Traits::kBlockN - 1) / Traits::kBlockN,
                               sched::attn_split_fixed_blocks(Traits::kHeadDim),
                               sched::attn_split_penalty_pct(Traits::kHeadDim));
}

// Bytes of the split tail's workspace for this problem on `device`: 0 when its schedule does not split.
template <class Traits>
inline size_t attn_split_workspace_bytes(const AttnForwardProblem& p, int device) {
  int grid = 0;
  if (attn_grid_size<Traits>(p, device, &grid) != cudaSuccess) return 0;
  return attn_local_schedule<Traits>(p, grid, true).split() ? AttnSplit<Traits>::workspace_bytes(grid) : 0;
}

// first_m_blocks: the tile scheduler's first phase (sched::AttnTileScheduler; 0: one phase). FP8 traits:
// the quantization pre-pass into a.workspace runs first, on the same stream (a was checked by
// attn_forward_can_implement).
// split_workspace (one phase only): attn_split_workspace_bytes of device memory; the tail then splits
// where the schedule says so, and the launch first zeroes its flags on `stream`.
// kAllowSplit: instantiate the split-tail kernel too (the local epilogue only; the fused ones run whole tiles).
template <class Traits, class Epilogue, bool kAllowSplit = false>
cudaError_t attn_launch_with_epilogue(const AttnForwardArgs& a, typename Epilogue::Params const& ep, cudaStream_t stream,
                                      int first_m_blocks = 0, void* split_workspace = nullptr) {
  using Kernel = AttnForwardKernel<Traits, Epilogue>;
  using Element = typename Traits::ElementMma;
  const AttnForwardProblem& p = a.problem;

  typename Kernel::Mainloop::Arguments ma{};
  ma.batch = p.batch;
  ma.seq_q = p.seq_q;
  ma.seq_k = p.seq_k;
  ma.heads = p.heads;
  ma.softmax_scale = p.softmax_scale > 0.f ? p.softmax_scale : 1.f / std::sqrt(float(p.head_dim));
  if constexpr (Traits::kFp8) {
    // The operands are the pre-pass's.
    static_assert(Traits::kBlockN == kFp8KBlock);
    const Fp8Workspace w = fp8_workspace_layout(p);
    if (const cudaError_t qe = fp8_quantize(a, w, stream); qe != cudaSuccess) return qe;
    const Fp8Operands op = fp8_operands(w, a.workspace);
    const int64_t row = int64_t(p.heads) * p.head_dim;  // Q8, K8: [B, S, H, D] contiguous
    ma.q = static_cast<typename Traits::ElementQK const*>(op.q8);
    ma.k = static_cast<typename Traits::ElementQK const*>(op.k8);
    ma.q_stride_seq = row;
    ma.q_stride_head = p.head_dim;
    ma.q_stride_batch = row * p.seq_q;
    ma.k_stride_seq = row;
    ma.k_stride_head = p.head_dim;
    ma.k_stride_batch = row * p.seq_k;
    ma.v = static_cast<Element const*>(op.vt8);
    ma.v_stride_seq = w.seq_k_pad;  // Vt8 [B, H, D, seq_k_pad]: the dim stride
    ma.v_stride_head = int64_t(p.head_dim) * w.seq_k_pad;
    ma.v_stride_batch = int64_t(p.heads) * p.head_dim * w.seq_k_pad;
    ma.q_scale = op.q_scale;
    ma.k_scale = op.k_scale;
    ma.v_scale = op.v_scale;
    ma.q_dot_kmean = op.q_dot_kmean;
    ma.q_rows = w.q_rows;
    ma.k_blocks = w.k_blocks;
    ma.vt_keys = w.seq_k_pad;
  } else {
    ma.q = static_cast<Element const*>(a.q);
    ma.k = static_cast<Element const*>(a.k);
    ma.q_stride_batch = p.q_stride_batch;
    ma.q_stride_seq = p.q_stride_seq;
    ma.q_stride_head = p.q_stride_head;
    ma.k_stride_batch = p.k_stride_batch;
    ma.k_stride_seq = p.k_stride_seq;
    ma.k_stride_head = p.k_stride_head;
    ma.v = static_cast<Element const*>(a.v);
    ma.v_stride_batch = p.v_stride_batch;
    ma.v_stride_seq = p.v_stride_seq;
    ma.v_stride_head = p.v_stride_head;
  }

  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return e;
  constexpr int smem_bytes = Kernel::kSharedBytes;
  if constexpr (Traits::kClusterM > 1) {
    // CTA pairs: whole tiles of the paired one-phase schedule, the grid the pairs the device holds at once.
    static_assert(!kAllowSplit, "clusters run whole tiles");
    if (first_m_blocks > 0) return cudaErrorInvalidValue;
    constexpr auto kernel = attn_forward_kernel<Traits, Epilogue, false>;
    if ((e = gpu::set_max_dynamic_shared_memory_once<kernel>(device, smem_bytes)) != cudaSuccess) return e;
    const int clusters =
        gpu::max_active_clusters_once<kernel>(device, Traits::kClusterM, Traits::kNumThreads, smem_bytes);
    if (clusters < 1) return cudaErrorInvalidConfiguration;
    const sched::AttnTileScheduler paired =
        sched::AttnTileScheduler(p.seq_q, Traits::kBlockM, p.heads, p.batch).paired();
    const int grid = sched::AttnTileScheduler::paired_grid_size(paired.num_tiles(), clusters);
    const typename Kernel::Params params{Kernel::Mainloop::to_params(ma), ep, paired, AttnSplitParams{}};
    return gpu::launch_clustered(kernel, grid, Traits::kNumThreads, smem_bytes, Traits::kClusterM, stream, params);
  }
  int grid = 0;
  if ((e = attn_grid_size<Traits>(p, device, &grid)) != cudaSuccess) return e;
  typename Kernel::Params params{Kernel::Mainloop::to_params(ma), ep,
                                 first_m_blocks > 0
                                     ? sched::AttnTileScheduler(p.seq_q, Traits::kBlockM, p.heads, p.batch, first_m_blocks)
                                     : attn_local_schedule<Traits>(p, grid, kAllowSplit && split_workspace != nullptr),
                                 AttnSplitParams{}};
  if (params.scheduler.split()) {
    params.split = AttnSplit<Traits>::params(split_workspace, grid);
    if ((e = cudaMemsetAsync(params.split.flags, 0, AttnSplit<Traits>::flag_bytes(grid), stream)) != cudaSuccess) {
      return e;
    }
  }

  auto launch = [&](auto split_tail) {
    constexpr auto kernel = attn_forward_kernel<Traits, Epilogue, decltype(split_tail)::value>;
    const cudaError_t le = gpu::set_max_dynamic_shared_memory_once<kernel>(device, smem_bytes);
    if (le != cudaSuccess) return le;
    kernel<<<grid, Traits::kNumThreads, smem_bytes, stream>>>(params);
    return cudaGetLastError();
  };
  if constexpr (kAllowSplit) {
    if (params.scheduler.split()) return launch(std::true_type{});
  }
  return launch(std::false_type{});
}

}  // namespace xstage::attn
