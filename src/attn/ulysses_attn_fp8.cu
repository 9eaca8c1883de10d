// The FP8 fused attention + post-attention All-to-All kernels: the quantization pre-pass, then the FP8
// kernel with the same two TMA bulk-store epilogues as the bf16 pair (ulysses_attn.cu). The epilogues
// receive the normalized bf16-bound output tile either way, so every Ulysses epilogue composes with
// either precision.
#include "attn_fp8_quant.hpp"
#include "attn_kernel_traits.cuh"
#include "ulysses_fused_launch.cuh"
#include "ulysses_kernels.hpp"

namespace xstage::attn {

cudaError_t attn_forward_fused_a2a_fp8(const AttnForwardArgs& a, const A2AEpilogueParams& ep, FusedEpilogue mode,
                                       cudaStream_t stream) {
  using Traits = AttnFp8KernelTraits<kFp8HeadDim>;
  static_assert(Traits::kBlockM == AttnKernelTraits<kFp8HeadDim>::kBlockM, "one grid and flag count for both");
  return launch_fused_a2a<Traits>(a, ep, mode, stream);
}

}  // namespace xstage::attn
