// Tile sizes of the attention forward kernel, chosen on the host by a constexpr function so that the
// kernel, the launcher, the CLI and the CPU tests agree on one table.
#pragma once

#include "xstage/sched/attn_tuning.hpp"

namespace xstage::sched {

struct AttnTileConfig {
  int block_m;          // query rows per CTA tile (64 per consumer warpgroup)
  int block_n;          // key/value rows per mainloop step
  int kv_stages;        // shared-memory stages of the K and of the V pipeline
  int mma_warpgroups;   // consumer warpgroups (each owns 64 query rows of the tile)
  bool wg_gemm_order;   // consumer warpgroups take turns issuing their GEMMs (one's softmax under the other's GEMMs)
  // CTAs per cluster of the local forward's whole-tile kernel: the CTAs of a cluster run adjacent m-blocks
  // of one head in lockstep, and each loads 1 / cluster_m of every K and V block and multicasts it into
  // all of them (AttnTileScheduler::paired). 1: no cluster. The fused Ulysses kernels and the split tail
  // run without clusters.
  int cluster_m = 1;
  // bf16: each consumer warpgroup copies its 64 Q rows into registers once per tile (head_dim / 4 per thread)
  // and S = Q K^T takes them from there; Q's shared-memory stage is then free for the next tile's Q at once.
  // The GEMM's Q reads from shared memory were 1/5 of the bytes its tensor cores read there per key block
  // (64 x 128 Q + 128 x 128 K for S, 128 x 128 V for P V), and under the 700 W limit bytes moved are clock:
  // 1.5-3.3 % faster at every d = 128 grid point though the clock fell 15-45 MHz (docs/attn_notes.md, round 10).
  bool q_in_regs = true;
};

constexpr bool attn_head_dim_supported(int head_dim) { return head_dim == 64 || head_dim == 128; }

// Shared memory per CTA (bf16): Q tile + stages x (K tile + V tile). 128 x 128 with two stages of each
// is 160 KiB, leaving room under the 227 KiB limit; d = 64 halves every tile, so a deeper pipeline fits.
// d = 64 and the FP8 kernel run three consumer warpgroups (192-row tiles; each consumer then holds 160 registers
// instead of 240; two in tuning builds): kAttnD64Warpgroups and kAttnFp8Warpgroups, attn_tuning.hpp.
constexpr AttnTileConfig attn_tile_config(int head_dim) {
  if (head_dim == 64) {
    // Q in registers not measured at d = 64
    return AttnTileConfig{64 * kAttnD64Warpgroups, 128, 3, kAttnD64Warpgroups, true, 1, false};
  }
  // No clusters: CTA pairs (cluster_m 2, each K and V block read from L2 once per pair and multicast) ran
  // at the single CTA's rate and clock, 0.988-1.011x at the 16 grid points (geomean 1.002, within the
  // run-to-run spread), although the kernel without any K / V loads (a measurement build on stale stages, removed after 5942f56) ran
  // 7-16 % faster at 60-200 MHz more: what K and V cost is not reading them from L2 but delivering them into
  // every CTA's shared memory, which multicast does not reduce (docs/attn_notes.md, round 10). Tuning builds:
  // kAttnTuneClusterM (attn_tuning.hpp).
  return AttnTileConfig{128, 128, 2, 2, true, 1};
}

// The FP8 kernel's one head dimension, and the alignment of its workspace (the pre-pass's 16- and 32-byte
// stores and the TMA descriptors over it): host constants, so that builds without the kernel check them too.
inline constexpr int kAttnFp8HeadDim = 128;
inline constexpr int kAttnFp8WorkspaceAlign = 256;

// The FP8 kernel (head_dim 128): e4m3 tiles are half the bytes, so a longer key block fits in two stages
// (128 x 224: Q 16 KiB + 2 x (K + V) 112 KiB + the epilogue's staging), and it spends the softmax's
// fixed per-block costs (row-max shuffles, barriers, pipeline waits) over more keys. block_n is also the
// key block of one K quantization scale, and a multiple of 32 (the P V GEMM's k step).
constexpr AttnTileConfig attn_fp8_tile_config(int /*head_dim*/) {
  // Q from shared memory: s8 Q K^T (not measured in registers). Three warpgroups hold O 64 + S 64 + P 16
  // registers a thread at 128 keys, over their 160 (ptxas spills and serializes the wgmmas): 96 keys.
  return AttnTileConfig{64 * kAttnFp8Warpgroups, kAttnFp8Warpgroups == 3 ? 96 : 128, 2, kAttnFp8Warpgroups, true, 1,
                        false};
}

// The tile table of the kernel that runs `head_dim` at a precision (bf16, or fp8: the FP8 kernel's entry).
constexpr AttnTileConfig attn_kernel_tile_config(int head_dim, bool fp8) {
  return fp8 ? attn_fp8_tile_config(head_dim) : attn_tile_config(head_dim);
}
// Query rows per tile of that kernel.
constexpr int attn_block_m(int head_dim, bool fp8) { return attn_kernel_tile_config(head_dim, fp8).block_m; }

// The split tail's cost model (AttnTileScheduler::with_split_tail): what a tile costs outside its key
// blocks (the first block's S GEMM and softmax with no P V under them, the last P V, the epilogue), in key
// blocks. Nsight Compute at 8192 x 5 and 16384 x 5, head_dim 128: 18.3 K cycles a tile against 2.34 K a
// key block (docs/attn_notes.md, round 7).
constexpr int attn_split_fixed_blocks(int /*head_dim*/) { return 8; }
// The split-tail kernel's per-tile cost against the whole-tile kernel's, in percent (same process, same
// tiles: 2.5-3.5 % at 16K-119K keys; docs/attn_notes.md, round 8). With it and the 3 % gain margin of
// with_split_tail only tails that leave most SMs idle split; splitting every tail the model without them
// calls a gain measured 2.1-4.4 % slower (round 9: under the 700 W limit a filled last round costs clock).
constexpr int attn_split_penalty_pct(int /*head_dim*/) { return 3; }

constexpr int attn_smem_operand_bytes(int head_dim) {
  const AttnTileConfig c = attn_tile_config(head_dim);
  return 2 * head_dim * (c.block_m + 2 * c.kv_stages * c.block_n);
}

}  // namespace xstage::sched
