// The fused attention + post-attention All-to-All kernels (head dim 128 only): two instantiations of the
// same kernel template as the local path, the TMA bulk-store epilogue piggyback and completion-coupled;
// the FP8 pair is in ulysses_attn_fp8.cu.
#include <string>

#include "attn_kernel_traits.cuh"
#include "ulysses_fused_launch.cuh"
#include "ulysses_kernels.hpp"

namespace xstage::attn {

namespace {
using FusedTraits = AttnKernelTraits<128>;
}

std::string attn_fused_a2a_can_implement(const AttnForwardArgs& args, const A2AEpilogueParams& ep) {
  const AttnForwardProblem& p = args.problem;
  if (p.head_dim != 128) return "head_dim " + std::to_string(p.head_dim) + " (the fused kernels support 128)";
  if (p.batch != 1) return "batch " + std::to_string(p.batch) + " (the fused kernels support 1)";
  if (p.seq_q != ep.seq) return "seq_q must equal the All-to-All sequence";
  // Keys may outnumber the queries (joint tokens appended to K and V only): the mainloop runs over seq_k.
  if (p.seq_k < 1) return "seq_k " + std::to_string(p.seq_k);
  if (ep.world < 1 || ep.world > kA2AMaxRanks) return "world " + std::to_string(ep.world);
  if (ep.rank < 0 || ep.rank >= ep.world) return "rank " + std::to_string(ep.rank);
  if (ep.shard_len != a2a_shard_len(ep.seq, ep.world) || a2a_local_len(ep.seq, ep.world, ep.world - 1) < 1)
    return "seq " + std::to_string(ep.seq) + " cannot be sharded over " + std::to_string(ep.world) + " ranks";
  if (ep.head_offset + p.heads > ep.heads_total) return "head_offset + heads exceeds heads_total";
  const int block_m = sched::attn_block_m(p.head_dim, args.precision == AttnPrecision::kFp8);
  const int m_blocks = (p.seq_q + block_m - 1) / block_m;
  if (ep.first_m_blocks < 0 || ep.first_m_blocks > m_blocks)
    return "first_m_blocks " + std::to_string(ep.first_m_blocks) + " (0.." + std::to_string(m_blocks) + ")";
  // ep.dst / ep.flags are device tables (checked by the layer that fills them).
  if (!ep.dst || !ep.flags || !ep.epoch) return "null pointer table or epoch";
  AttnForwardArgs local = args;  // the fused kernels write no local output; the check wants a pointer
  if (!local.o) local.o = const_cast<void*>(args.q);
  return attn_forward_can_implement(local);
}

int attn_fused_a2a_grid(const AttnForwardProblem& p, int device, AttnPrecision precision) {
  int grid = 0;
  const cudaError_t e = precision == AttnPrecision::kFp8 ? attn_grid_size<AttnFp8KernelTraits<128>>(p, device, &grid)
                                                         : attn_grid_size<FusedTraits>(p, device, &grid);
  return e == cudaSuccess ? grid : 0;
}

cudaError_t attn_forward_fused_a2a(const AttnForwardArgs& args, const A2AEpilogueParams& ep, FusedEpilogue mode,
                                   cudaStream_t stream) {
  if (!attn_fused_a2a_can_implement(args, ep).empty()) return cudaErrorInvalidValue;
  AttnForwardArgs a = args;
  if (!a.o) a.o = const_cast<void*>(args.q);  // unused by the A2A epilogue
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return e;
  if (attn_fused_a2a_grid(args.problem, device, a.precision) > kA2AMaxCtas) return cudaErrorInvalidValue;
  if (a.precision == AttnPrecision::kFp8) return attn_forward_fused_a2a_fp8(a, ep, mode, stream);
  return launch_fused_a2a<FusedTraits>(a, ep, mode, stream);
}

}  // namespace xstage::attn
