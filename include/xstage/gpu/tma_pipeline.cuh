// Parameters of a CUTLASS TMA pipeline (cutlass::PipelineTmaAsync) in a warp-specialized kernel whose
// producer warpgroup loads and whose consumer warpgroups compute: one place for the role, leader and
// consumer-count rules shared by the attention and fused MoE kernels.
#pragma once

#include <cstdint>

#include <cutlass/pipeline/sm90_pipeline.hpp>

namespace xstage::gpu {

// transaction_bytes: bytes one stage's TMA loads deliver; num_consumers: consumer threads that release a
// stage; initializing_warp: the warp that initializes this pipeline's barriers (one per pipeline).
template <class Pipeline>
__device__ __forceinline__ typename Pipeline::Params tma_pipeline_params(std::uint32_t transaction_bytes,
                                                                         bool is_producer, int num_consumers,
                                                                         int initializing_warp) {
  typename Pipeline::Params p;
  p.transaction_bytes = transaction_bytes;
  p.role = is_producer ? Pipeline::ThreadCategory::Producer : Pipeline::ThreadCategory::Consumer;
  p.is_leader = threadIdx.x == 0;
  p.num_consumers = num_consumers;
  p.initializing_warp = initializing_warp;
  return p;
}

}  // namespace xstage::gpu
