// The FP8 attention forward with the local epilogue: the quantization pre-pass, then the FP8 kernel on
// its output, both on the caller's stream. Its own translation unit: one more kernel instantiation,
// compiled beside the bf16 ones.
#include "attn_epilogue_local.cuh"
#include "attn_fp8_quant.hpp"
#include "attn_launch.cuh"

namespace xstage::attn {

cudaError_t attn_forward_fp8_local(const AttnForwardArgs& a, cudaStream_t stream) {
  using Traits = AttnFp8KernelTraits<kFp8HeadDim>;
  using Epilogue = AttnEpilogueLocal<Traits>;
  using Element = typename Traits::Element;
  const AttnForwardProblem& p = a.problem;
  const typename Epilogue::Params ep{static_cast<Element*>(a.o), p.o_stride_batch, p.o_stride_seq, p.o_stride_head,
                                     a.lse, p.seq_q, p.heads};
  return attn_launch_with_epilogue<Traits, Epilogue>(a, ep, stream);
}

}  // namespace xstage::attn
