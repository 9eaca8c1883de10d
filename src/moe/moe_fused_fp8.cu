// FP8 (e4m3, W8A8) instantiations of the fused MoE kernel: a translation unit of their own, so the two
// precisions compile in parallel.
#include "moe_fused_impl.cuh"

namespace xstage::moe {

cudaError_t launch_moe_fused_fp8(const MoeFusedArguments& a, MoeFusedSchedule schedule, int grid, cudaStream_t stream) {
  return fused_detail::launch_fused_schedule<MoeFusedTraitsT<true>>(a, schedule, grid, stream);
}

}  // namespace xstage::moe
