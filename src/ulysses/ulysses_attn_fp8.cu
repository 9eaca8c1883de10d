// The FP8 fused attention + post-attention All-to-All kernels: the quantization pre-pass, then the FP8
// kernel with the same two TMA bulk-store epilogues as the bf16 pair (ulysses_attn.cu). The epilogues
// receive the normalized bf16-bound output tile either way, so every Ulysses epilogue composes with
// either precision. The FP8 kernel's tiles may differ from the bf16 one's (sched::attn_fp8_tile_config): its
// grid and flag count are its own (attn_fused_a2a_grid at the precision).
#include "attn_fp8_quant.hpp"
#include "attn_kernel_traits.cuh"
#include "ulysses_fused_launch.cuh"
#include "ulysses_kernels.hpp"

namespace xstage::attn {

cudaError_t attn_forward_fused_a2a_fp8(const AttnForwardArgs& a, const A2AEpilogueParams& ep, FusedEpilogue mode,
                                       cudaStream_t stream) {
  using Traits = AttnFp8KernelTraits<kFp8HeadDim>;
  return launch_fused_a2a<Traits>(a, ep, mode, stream);
}

}  // namespace xstage::attn
