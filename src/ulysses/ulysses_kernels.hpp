// Kernels of the Ulysses attention layer (host interface): the fused attention + post-attention
// All-to-All, the stand-alone remote-store All-to-All, the consumer-side wait, and the head-block
// copies that pack/unpack NCCL's contiguous per-peer chunks. bf16 in and out (bf16 or FP8 operands), head_dim 128 for the fused kernels.
#pragma once

#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>

#include "a2a_params.hpp"
#include "attn_forward.hpp"

namespace xstage::attn {

// The fused kernel's epilogue (attn_epilogue_a2a.cuh): each warp stages its 16 rows and TMA bulk-stores
// them to their owners (256 B per row), one flag per CTA at the end.
enum class FusedEpilogue {
  kPiggybackTma,          // no per-tile wait: the next tile's Q-loop covers the drain
  kCompletionCoupledTma,  // every tile waits for its bulk stores' completion (wait_group 0): the counterfactual
};

// Attention over args.problem (batch 1, heads = heads_per_gpu, seq_q = ep.seq, any seq_k, head_dim 128)
// whose output tiles go to their owners through ep; args.o and args.lse are unused. Empty string when
// it can run, else the reason.
std::string attn_fused_a2a_can_implement(const AttnForwardArgs& args, const A2AEpilogueParams& ep);
cudaError_t attn_forward_fused_a2a(const AttnForwardArgs& args, const A2AEpilogueParams& ep, FusedEpilogue mode,
                                   cudaStream_t stream);
// The FP8 pair (ulysses_attn_fp8.cu), called by attn_forward_fused_a2a for args.precision kFp8 after its
// checks: quantizes into args.workspace, then launches.
cudaError_t attn_forward_fused_a2a_fp8(const AttnForwardArgs& args, const A2AEpilogueParams& ep, FusedEpilogue mode,
                                       cudaStream_t stream);
// CTAs of the fused kernel's persistent grid at a precision (each publishes one flag per receiver).
int attn_fused_a2a_grid(const AttnForwardProblem& p, int device, AttnPrecision precision);

// Stand-alone post-attention All-to-All: o_local is [seq, heads_per_gpu, head_dim] bf16 (the local
// epilogue's layout, rows in the kernel's rotated query order); every row goes to its owner exactly as the fused epilogue sends it; each CTA
// publishes one flag per receiver at its end. grid: CTAs (<= kA2AMaxCtas).
cudaError_t a2a_remote_store(const void* o_local, const A2AEpilogueParams& ep, int heads_per_gpu, int head_dim,
                             int grid, cudaStream_t stream);

// What the owner's wait that expired was waiting for: written by a2a_wait's kernel into host-mapped
// memory before it traps, so the host can name the rank, the source rank and the step after the launch
// failed (host memory stays readable when the CUDA context is lost). `expired` is written last.
struct A2AWaitFailure {
  uint32_t expired;        // 0: no wait expired; 1: the fields below are the first expired wait's
  uint32_t rank;           // the owner that waited
  uint32_t src, cta;       // the source rank and its CTA whose flag did not arrive
  uint32_t target, seen;   // the epoch awaited, the flag's last value
  uint64_t waited_ns;      // from the wait kernel's start to the expiry
};
// One line naming the waiter, the source rank, the step and the values; empty when nothing expired.
std::string a2a_wait_failure_text(const A2AWaitFailure& f);

// The owner's consumer side: waits (bounded, ld.acquire.sys) until every source rank's ctas_per_src
// CTAs published epoch + 1, then advances *epoch. One CTA. Later kernels on the stream may read.
// Every flag's wait ends at one deadline, timeout_ns after the kernel starts (the waits of missing flags
// do not add up). Past it the kernel records the first expired wait in *failure (device pointer of a
// host-mapped A2AWaitFailure; null: not recorded), prints it and traps. extra_epochs raises the epoch
// awaited beyond epoch + 1: 0 except for fault injection in the liveness tests (UlyssesTesting).
cudaError_t a2a_wait(const uint32_t* flags_local, uint32_t* epoch, int world, int ctas_per_src, int rank,
                     uint64_t timeout_ns, cudaStream_t stream, A2AWaitFailure* failure = nullptr,
                     uint32_t extra_epochs = 0);

// blocks[b][s][h][:] <-> rows[s][b * heads_per_block + h][:], b < nblocks, s < seq, h < heads_per_block.
// to_blocks: rows → blocks (pack before a send), else blocks → rows (unpack after a receive).
cudaError_t head_block_copy(void* blocks, void* rows, int nblocks, int seq, int heads_per_block, int head_dim,
                            bool to_blocks, cudaStream_t stream);

}  // namespace xstage::attn
