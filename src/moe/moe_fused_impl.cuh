// The fused MoE kernel template (both precisions; see moe_fused.cu for the design). Included by
// moe_fused.cu (bf16) and moe_fused_fp8.cu (FP8 e4m3), one translation unit per precision.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/pipeline/sm90_pipeline.hpp>

#include "moe_fused_consumer.cuh"
#include "moe_fused_dispatch.cuh"
#include "moe_fused_dispatch_warps.cuh"
#include "moe_fused_handoff.cuh"
#include "moe_fused_kernel.hpp"
#include "moe_fused_mainloop.cuh"
#include "moe_fused_producer.cuh"
#include "moe_fused_storage.cuh"
#include "xstage/gpu/launch_attr.hpp"
#include "xstage/gpu/ptx_mbarrier.cuh"
#include "xstage/gpu/tma_pipeline.cuh"
#include "xstage/sched/moe_schedule.hpp"

namespace xstage::moe {

// The completion/reduction kernel launch (moe_fused.cu), after the fused kernel of `grid` CTAs.
cudaError_t launch_moe_fused_finish(const MoeFusedKernelParams& p, int grid, cudaStream_t stream);
// The FP8 kernels (moe_fused_fp8.cu).
cudaError_t launch_moe_fused_fp8(const MoeFusedArguments& a, MoeFusedSchedule schedule, int grid, cudaStream_t stream);

namespace fused_detail {

// The fused kernel: barrier set-up and count exchange by every thread, then one role per warp
//   producer warpgroup (40 registers): warp 0 the TMA producer (moe_fused_producer.cuh), warps 1-3 the
//     dispatch warps and the releaser (moe_fused_dispatch_warps.cuh);
//   consumer warpgroups 1-2 (232 registers): GMMA and epilogues (moe_fused_consumer.cuh).
template <class T, class Schedule>
__global__ void __launch_bounds__(T::kNumThreads, 1) __cluster_dims__(T::kClusterSize, 1, 1)
    moe_fused_kernel(CUTE_GRID_CONSTANT MoeFusedKernelParams const p, CUTE_GRID_CONSTANT MoeFusedTmaT<T> const tma) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Pipeline = typename T::Pipeline;
  extern __shared__ __align__(1024) char smem_raw[];
  auto& smem = *reinterpret_cast<MoeFusedKernelStorage<T>*>(smem_raw);

  const int warp_idx = cutlass::canonical_warp_idx_sync();
  const bool is_producer = cutlass::canonical_warp_group_idx() == 0;
  if (warp_idx == 0 && cute::elect_one_sync()) {
    cute::prefetch_tma_descriptor(tma.recv.get_tma_descriptor());
    cute::prefetch_tma_descriptor(tma.w1.get_tma_descriptor());
    cute::prefetch_tma_descriptor(tma.h.get_tma_descriptor());
    cute::prefetch_tma_descriptor(tma.w2.get_tma_descriptor());
  }
  Pipeline pipe(smem.main.pipe, gpu::tma_pipeline_params<Pipeline>(T::kStageBytes, is_producer, T::kNumMmaThreads, 0),
                typename T::ClusterShape{});
  if (threadIdx.x == 0) {
    if (T::kFp8) {
      cutlass::arch::ClusterBarrier::init(&smem.main.amax_bar[0], 1);
      cutlass::arch::ClusterBarrier::init(&smem.main.amax_bar[1], 1);
    }
    smem.main.l1_handoff.init(T::kNumMmaThreads / 32);
    cutlass::arch::fence_barrier_init();
  }
  gpu::cluster_sync_all_threads();  // the partner's barriers are initialized before any multicast or remote release

  moe_exchange_counts(p, smem.layout);  // ends with __syncthreads (barriers initialized too)

  const MoePairCoord pair{int(blockIdx.x / 2), int(gridDim.x / 2), int(blockIdx.x % 2)};  // pair = cluster
  if (is_producer) {
    cutlass::arch::warpgroup_reg_dealloc<T::kProducerRegisters>();
    if (warp_idx != 0) {
      moe_dispatch_warps<T, Schedule>(p, smem, warp_idx, pair);
    } else {
      moe_tma_producer<T, Schedule>(p, tma, smem, pipe, pair);
    }
  } else {
    cutlass::arch::warpgroup_reg_alloc<T::kConsumerRegisters>();
    moe_consumers<T, Schedule>(p, smem, pipe, pair);
  }
  // Neither CTA of the pair exits while the other may still multicast into it or release its stages.
  gpu::cluster_sync_all_threads();
#else
  __trap();  // built for another architecture: the launcher refuses devices other than sm_90a
#endif
}

// One launch from its arguments: the kernel's parameters (to_params), the TMA descriptors and the events
// come from `a`; the completion kernel follows on the stream.
template <class T, class Schedule>
cudaError_t launch_fused(const MoeFusedArguments& a, int grid, cudaStream_t stream) {
  constexpr int smem_bytes = int(sizeof(MoeFusedKernelStorage<T>));
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return e;
  if ((e = gpu::set_max_dynamic_shared_memory_once<moe_fused_kernel<T, Schedule>>(device, smem_bytes)) != cudaSuccess)
    return e;
  const MoeFusedKernelParams p = to_params(a);
  const MoeFusedTmaT<T> tma = make_moe_fused_tma<T>(a);
  if (a.kernel_begin != nullptr && (e = cudaEventRecord(a.kernel_begin, stream)) != cudaSuccess) return e;
  moe_fused_kernel<T, Schedule><<<grid, T::kNumThreads, smem_bytes, stream>>>(p, tma);
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  if (a.kernel_end != nullptr && (e = cudaEventRecord(a.kernel_end, stream)) != cudaSuccess) return e;
  return launch_moe_fused_finish(p, grid, stream);
}

template <class T>
cudaError_t launch_fused_schedule(const MoeFusedArguments& a, MoeFusedSchedule schedule, int grid,
                                  cudaStream_t stream) {
  return schedule == MoeFusedSchedule::kWave ? launch_fused<T, sched::ExpertWaveMoeScheduler>(a, grid, stream)
                                             : launch_fused<T, sched::InterleavedMoeScheduler>(a, grid, stream);
}

}  // namespace fused_detail

}  // namespace xstage::moe
