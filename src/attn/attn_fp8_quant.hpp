// The FP8 attention path's quantization pre-pass and its workspace: one definition of the layout the
// pre-pass writes and the FP8 kernel reads (xstage/attn/forward.hpp states the scheme for users).
//
//   Q8  [B, Sq, H, D] s8 (or e4m3), contig.  q / q_scale[b, h, query row]
//   K8  [B, Sk, H, D] s8 (or e4m3), contig.  (k - k_mean[b, h, :]) / k_scale[b, h, key block of kKBlock rows]
//   Vt8 [B, H, D, Sk_pad] e4m3               v^T / v_scale[b, h, d], keys permuted within groups of 32 (xstage/sched/attn_fp8_key_order.hpp)
//   q_scale, k_scale, v_scale, k_mean      fp32
//   q_dot_kmean [b, h, query row]          fp32 q . k_mean: what the smoothing took out of the row's scores,
//                                          added back to the log-sum-exp (the output does not see it)
//   k_sum, v_max partials                  fp32 [B*H, chunks, D]: the sequence statistics, reduced in a
//                                          fixed order (bit-reproducible; no float atomics)
//
// Why these choices (docs/attn_fp8.md): Q and K in INT8 (s8 GMMA runs at the e4m3 rate): their rounding
// error is uniform within a block's range instead of e4m3's 2^-4 relative step, which brings the scores'
// error's share of the output error from 3.9 % to 1.2 % on N(0, 1) inputs (the P V product keeps e4m3,
// as P's values span many octaves). A scale per
// query row (free: the softmax applies a per-row factor anyway) and per block of keys follows the rows' own
// range (a DiT row with outlier channels does not flatten its neighbours); subtracting K's mean over the
// sequence removes the large shared component that would otherwise take the 8 bits' range (softmax is
// unchanged by it: q . mean is the same for every key of a row); V per channel, because the output's
// channel c is a weighted mean of V's channel c alone, so its scale factors out of P V exactly.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "xstage/attn/forward.hpp"
#include "xstage/gpu/host_device.hpp"
#include "xstage/sched/attn_fp8_key_order.hpp"  // fp8_key_of_slot, kFp8KeyGroup
#include "xstage/sched/attn_tile_config.hpp"

namespace xstage::attn {

inline constexpr int kFp8HeadDim = sched::kAttnFp8HeadDim;  // the one head dimension the FP8 kernel is built for
// Q and K in s8 (kFp8QkInt8) or e4m3 (tuning builds: -DXSTAGE_ATTN_FP8_TUNE_QK_E4M3).
#if defined(XSTAGE_ATTN_FP8_TUNE_QK_E4M3)
inline constexpr bool kFp8QkInt8 = false;
#else
inline constexpr bool kFp8QkInt8 = true;
#endif
inline constexpr float kFp8QkMax = kFp8QkInt8 ? 127.f : 448.f;  // the largest Q8 / K8 magnitude
// INT8 scores reach the softmax as floats without a conversion instruction: for |s| < 2^22, the int32 bits
// of s + 0x4B400000 are the float 1.5 * 2^23 + s, exactly (one IADD); the softmax subtracts kFp8QkIntBias
// inside its FFMA. 128 products of |q|, |k| <= 127 stay below 2^21.
inline constexpr int32_t kFp8QkIntBiasBits = 0x4B400000;
inline constexpr float kFp8QkIntBias = 12582912.f;
// Keys per K scale: the FP8 kernel's block_n (tuning builds: -DXSTAGE_ATTN_FP8_TUNE_BLOCK_N=192).
#if defined(XSTAGE_ATTN_FP8_TUNE_BLOCK_N)
inline constexpr int kFp8KBlock = XSTAGE_ATTN_FP8_TUNE_BLOCK_N;
#else
inline constexpr int kFp8KBlock = sched::attn_fp8_tile_config(kFp8HeadDim).block_n;
#endif
static_assert(kFp8KBlock % 32 == 0 && kFp8KBlock <= 256, "block_n: a multiple of the P V k step, one TMA box");
inline constexpr int kFp8StatRows = 256;  // sequence rows per partial of the K-sum / V-max statistics
inline constexpr float kFp8Max = 448.f;   // largest finite e4m3

struct Fp8Workspace {
  // Byte offsets into the workspace (each 256-byte aligned) and the counts that size them.
  size_t q8 = 0, k8 = 0, vt8 = 0, q_scale = 0, k_scale = 0, v_scale = 0, k_mean = 0, q_dot_kmean = 0, k_sum = 0,
         v_max = 0;
  size_t bytes = 0;
  int q_rows = 0;     // per (b, h): Q scales, Sq rounded up to the kernel's block_m (its last tile's rows)
  int k_blocks = 0;   // per (b, h): ceil(Sk / kFp8KBlock)
  int seq_k_pad = 0;  // Vt8's key extent: k_blocks * kFp8KBlock
  int stat_chunks = 0;
};

Fp8Workspace fp8_workspace_layout(const AttnForwardProblem& p);

// Device pointers into a workspace of at least layout.bytes bytes.
struct Fp8Operands {
  const void* q8;
  const void* k8;
  const void* vt8;
  const float* q_scale;
  const float* k_scale;
  const float* v_scale;
  const float* q_dot_kmean;
};
Fp8Operands fp8_operands(const Fp8Workspace& w, void* workspace);

// Quantizes args' q, k, v into args.workspace (five launches on `stream`). The caller has checked args
// (attn_forward_can_implement).
cudaError_t fp8_quantize(const AttnForwardArgs& args, const Fp8Workspace& w, cudaStream_t stream);

// The FP8 forward with the local epilogue (attn_fp8_forward.cu): fp8_quantize, then the FP8 kernel.
cudaError_t attn_forward_fp8_local(const AttnForwardArgs& args, cudaStream_t stream);

}  // namespace xstage::attn
