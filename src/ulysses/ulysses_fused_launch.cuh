// The fused epilogue mode -> the kernel that runs it, for one kernel traits (bf16: ulysses_attn.cu; FP8:
// ulysses_attn_fp8.cu, after its pre-pass): one mapping for both precisions.
#pragma once

#include "attn_epilogue_a2a.cuh"
#include "attn_launch.cuh"
#include "ulysses_kernels.hpp"

namespace xstage::attn {

template <class Traits>
cudaError_t launch_fused_a2a(const AttnForwardArgs& a, const A2AEpilogueParams& ep, FusedEpilogue mode,
                             cudaStream_t stream) {
  const int f = ep.first_m_blocks;
  switch (mode) {
    case FusedEpilogue::kPiggybackTma:
      return attn_launch_with_epilogue<Traits, AttnEpilogueA2A<Traits, false>>(a, ep, stream, f);
    case FusedEpilogue::kCompletionCoupledTma:
      return attn_launch_with_epilogue<Traits, AttnEpilogueA2A<Traits, true>>(a, ep, stream, f);
  }
  return cudaErrorInvalidValue;
}

}  // namespace xstage::attn
