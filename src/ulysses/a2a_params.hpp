// Parameters of the post-attention All-to-All (Ulysses: head shards → sequence shards), shared by the
// fused epilogue, the stand-alone remote-store A2A kernel and the host layer.
#pragma once

#include <cstdint>

#include "xstage/sched/attn_tile_scheduler.hpp"
#include "xstage/ulysses/shards.hpp"  // a2a_shard_len, a2a_local_len, row owners, rotations

#if defined(__CUDACC__)
#define XSTAGE_A2A_HD __host__ __device__ __forceinline__
#else
#define XSTAGE_A2A_HD inline
#endif

namespace xstage::attn {

inline constexpr int kA2AMaxRanks = 8;
// Flag slots per source rank on every receiver: one per CTA of the sending kernel.
inline constexpr int kA2AMaxCtas = 1024;

struct A2AEpilogueParams {
  // Device arrays of `world` pointers on this GPU (not arrays in the parameter block: the kernel would
  // keep all of them in registers across the attention mainloop, which then spills).
  void* const* dst;               // owner's output buffer [local_seq, heads_total, head_dim], bf16
  uint32_t* const* flags;         // owner's flag array [kA2AMaxRanks][kA2AMaxCtas]
  const uint32_t* epoch;          // this rank's completed-iteration counter (local)
  int rank;
  int world;
  int seq;        // full sequence (joint tokens included)
  int shard_len;  // rows per owner; the last owner has seq - (world - 1) * shard_len
  int heads_total;
  int head_offset;  // rank * heads_per_gpu
  // Kernel query row i is sequence row (i + row_rotation) mod seq (0: natural order).
  int row_rotation;
  // The tile scheduler's first phase (sched::AttnTileScheduler::first_m_blocks): with the own-rows-last
  // rotation, a2a_remote_m_blocks schedules every tile holding other owners' rows first, across heads.
  // 0: one phase (m-block fastest per head).
  int first_m_blocks;
};

// With the own-rows-last rotation, kernel rows [0, seq - local_len) belong to other owners: the number of
// leading block_m-row m-blocks holding at least one of them (a tile straddling the boundary counts as
// remote: its stores leave the GPU). 0 when the rank owns every row (world 1).
XSTAGE_A2A_HD int a2a_remote_m_blocks(int seq, int world, int rank, int block_m) {
  const int remote_rows = seq - a2a_local_len(seq, world, rank);
  return (remote_rows + block_m - 1) / block_m;
}
// Bytes of other owners' rows (head_dim bf16 values each) in the tiles of the schedule's final round,
// tiles [(rounds - 1) · grid, num_tiles) of a persistent grid of `grid` CTAs: the remote stores that no
// later Q-loop covers, whose drain the kernel's end exposes (the model's tail, drain only). Host only.
inline int64_t a2a_final_round_remote_bytes(const sched::AttnTileScheduler& s, int grid, int block_m, int seq,
                                            int world, int rank, int rotation, int head_dim) {
  const int tiles = s.num_tiles();
  if (tiles < 1 || grid < 1) return 0;
  const int shard = a2a_shard_len(seq, world);
  int64_t rows = 0;
  for (int t = (tiles - 1) / grid * grid; t < tiles; ++t) {
    const sched::AttnTile tile = s.tile(t);
    for (int i = tile.m_block * block_m; i < seq && i < (tile.m_block + 1) * block_m; ++i)
      rows += a2a_row_owner(a2a_sequence_row(i, rotation, seq), shard).owner != rank;
  }
  return rows * head_dim * 2;
}

}  // namespace xstage::attn
