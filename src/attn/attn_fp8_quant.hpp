// The FP8 attention path's quantization pre-pass and its workspace: one definition of the layout the
// pre-pass writes and the FP8 kernel reads (xstage/attn/forward.hpp states the scheme for users).
//
//   Q8  [B, Sq, H, D] s8, contig.          q / q_scale[b, h, query row]
//   K8  [B, Sk, H, D] s8, contig.          (k - k_mean[b, h, :]) / k_scale[b, h, key block of kFp8KBlock rows]
//   Vt8 [B, H, D, Sk_pad] e4m3             v^T / v_scale[b, h, d], keys permuted within groups of 32
//                                          (xstage/sched/attn_fp8_key_order.hpp)
//   Q8 and K8 are of the rotated rows: q diag(sign) H / 8 and (k - k_mean) diag(sign) H / 16, H the 128 x 128
//   Walsh-Hadamard matrix (entries +-1) and sign fp8_rotation_sign: their product is q k^T exactly
//   (H H^T = 128 I), so the scores are unchanged while each rotated channel mixes all of a row's channels.
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
// The rotation: a row whose range is set by a few outlier channels (DiT activations) would leave the other
// channels a few of the 8 bits; rotated, every channel carries a 1/sqrt(128) share of each outlier and the
// row's range follows its norm (outlier-channel inputs, measured: cosine 0.99803 -> 0.99957, relative L1
// 3.95 % -> 2.56 %, docs/attn_fp8.md). The signs keep a row that is flat across channels from being folded
// into one channel.
// V in one e4m3 term: e4m3 keeps 3 significant bits, and a weighted mean of zero-mean values keeps each
// value's relative rounding error (about 2.6 % RMS), so V alone costs the output 2.6 % relative L1. A second
// term (the remainder) took that to 0.2 % and the relative L1 to 2.5-2.7 % on every tested distribution, but
// the P V GEMM then ran twice the k steps: 16-21 % slower at M >= 16K, below the bf16 kernel (docs/attn_fp8.md;
// measured and removed, as were e4m3 Q K, P V in bf16 and Q and K unrotated: xstage/sched/attn_tuning.hpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "xstage/attn/forward.hpp"
#include "xstage/gpu/host_device.hpp"
#include "xstage/sched/attn_fp8_key_order.hpp"  // fp8_key_of_slot, kFp8KeyGroup
#include "xstage/sched/attn_tile_config.hpp"
#include "xstage/sched/attn_tuning.hpp"

namespace xstage::attn {

inline constexpr int kFp8HeadDim = sched::kAttnFp8HeadDim;  // the one head dimension the FP8 kernel is built for
inline constexpr float kFp8QkMax = 127.f;  // the largest Q8 / K8 magnitude (s8)
// INT8 scores reach the softmax as floats without a conversion instruction: for |s| < 2^22, the int32 bits
// of s + 0x4B400000 are the float 1.5 * 2^23 + s, exactly (one IADD); the softmax subtracts kFp8QkIntBias
// inside its FFMA. 128 products of |q|, |k| <= 127 stay below 2^21.
inline constexpr int32_t kFp8QkIntBiasBits = 0x4B400000;
inline constexpr float kFp8QkIntBias = 12582912.f;
// Keys per K scale: the FP8 kernel's block_n (the tile table's, or sched::kAttnTuneFp8BlockN).
inline constexpr int kFp8KBlock =
    sched::kAttnTuneFp8BlockN > 0 ? sched::kAttnTuneFp8BlockN : sched::attn_fp8_tile_config(kFp8HeadDim).block_n;
static_assert(kFp8KBlock % 32 == 0 && kFp8KBlock <= 256, "block_n: a multiple of the P V k step, one TMA box");
// Channel c's sign in the rotation: fixed bits (any +-1 pattern keeps q k^T exact; a fixed one keeps the
// pre-pass deterministic and its output reproducible).
XSTAGE_HOST_DEVICE constexpr float fp8_rotation_sign(int c) {
  return (((c < 64 ? 0x9E3779B97F4A7C15ull : 0xC2B2AE3D27D4EB4Full) >> (c & 63)) & 1u) ? -1.f : 1.f;
}
inline constexpr float kFp8RotationQ = 0.125f;    // Q rows: diag(sign) H / 8
inline constexpr float kFp8RotationK = 0.0625f;   // K rows: diag(sign) H / 16; (H / 8)(H / 16)^T = I
inline constexpr int kFp8StatRows = 256;  // sequence rows per partial of the K-sum / V-max statistics
inline constexpr float kFp8Max = 448.f;   // largest finite e4m3

struct Fp8Workspace {
  // Byte offsets into the workspace (each 256-byte aligned) and the counts that size them.
  size_t q8 = 0, k8 = 0, vt8 = 0, q_scale = 0, k_scale = 0, v_scale = 0, k_mean = 0, q_dot_kmean = 0, k_sum = 0,
         v_max = 0;
  size_t bytes = 0;
  int q_rows = 0;     // per (b, h): Q scales, Sq rounded up to the kernel's block_m (its last tile's rows)
  int k_blocks = 0;   // per (b, h): ceil(Sk / kFp8KBlock)
  int seq_k_pad = 0;  // keys rounded up to whole blocks: k_blocks * kFp8KBlock (Vt8's key extent)
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
