// Launch of the attention forward kernel with any epilogue policy: mainloop parameters (TMA
// descriptors) from the problem, the persistent grid, the dynamic shared-memory attribute. Used by the
// local path (attn_forward.cu) and the fused Ulysses launchers.
#pragma once

#include <cmath>

#include <cuda_runtime_api.h>

#include "attn_forward.hpp"
#include "attn_kernel.cuh"
#include "xstage/gpu/launch_attr.hpp"
#include "xstage/sched/attn_tile_scheduler.hpp"

namespace xstage::attn {

// Grid of the persistent kernel for this problem on `device` (one CTA per SM, at most one per tile).
template <class Traits>
inline cudaError_t attn_grid_size(const AttnForwardProblem& p, int device, int* grid) {
  int num_sms = 0;
  const cudaError_t e = cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device);
  if (e != cudaSuccess) return e;
  *grid = sched::AttnTileScheduler::grid_size(sched::AttnTileScheduler(p.seq_q, Traits::kBlockM, p.heads, p.batch).num_tiles(),
                                              num_sms);
  return cudaSuccess;
}

// first_m_blocks: the tile scheduler's first phase (sched::AttnTileScheduler; 0: one phase).
template <class Traits, class Epilogue>
cudaError_t attn_launch_with_epilogue(const AttnForwardArgs& a, typename Epilogue::Params const& ep, cudaStream_t stream,
                                      int first_m_blocks = 0) {
  using Kernel = AttnForwardKernel<Traits, Epilogue>;
  using Element = typename Traits::Element;
  const AttnForwardProblem& p = a.problem;

  typename Kernel::Mainloop::Arguments ma{};
  ma.q = static_cast<Element const*>(a.q);
  ma.k = static_cast<Element const*>(a.k);
  ma.v = static_cast<Element const*>(a.v);
  ma.batch = p.batch;
  ma.seq_q = p.seq_q;
  ma.seq_k = p.seq_k;
  ma.heads = p.heads;
  ma.q_stride_batch = p.q_stride_batch;
  ma.q_stride_seq = p.q_stride_seq;
  ma.q_stride_head = p.q_stride_head;
  ma.k_stride_batch = p.k_stride_batch;
  ma.k_stride_seq = p.k_stride_seq;
  ma.k_stride_head = p.k_stride_head;
  ma.v_stride_batch = p.v_stride_batch;
  ma.v_stride_seq = p.v_stride_seq;
  ma.v_stride_head = p.v_stride_head;
  ma.softmax_scale = p.softmax_scale > 0.f ? p.softmax_scale : 1.f / std::sqrt(float(p.head_dim));

  typename Kernel::Params params{Kernel::Mainloop::to_params(ma), ep,
                                 sched::AttnTileScheduler(p.seq_q, Traits::kBlockM, p.heads, p.batch, first_m_blocks)};
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return e;
  int grid = 0;
  if ((e = attn_grid_size<Traits>(p, device, &grid)) != cudaSuccess) return e;

  constexpr int smem_bytes = Kernel::kSharedBytes;
  if ((e = gpu::set_max_dynamic_shared_memory_once<attn_forward_kernel<Traits, Epilogue>>(device, smem_bytes)) !=
      cudaSuccess) {
    return e;
  }
  attn_forward_kernel<Traits, Epilogue><<<grid, Traits::kNumThreads, smem_bytes, stream>>>(params);
  return cudaGetLastError();
}

}  // namespace xstage::attn
