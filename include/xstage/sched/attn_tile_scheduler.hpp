// Static persistent tile scheduler of the attention forward kernel. Pure code: the kernel and the CPU
// tests run the same functions.
//
// A tile is (m_block, head, batch): kBlockM query rows of one head. Tiles are numbered with m_block
// fastest, so the CTAs of one wave work on few (head, batch) pairs at a time and share their K and V
// in L2. CTA c of a grid of G takes tiles c, c + G, c + 2G, ...: every non-causal tile costs the same,
// so the static round-robin balances as well as a dynamic queue and needs no global counter.
//
// Two phases (first_m_blocks = F, 0 < F < num_m_blocks): m-blocks [0, F) of every (head, batch) come
// before any other m-block, each phase numbered m_block fastest as above. The fused Ulysses epilogue
// uses it to schedule every tile holding other owners' rows (the rotated query order puts them first)
// before the rank's own rows across all heads: the remote stores then end waves before the kernel does,
// and the next tiles' Q-loops drain them (a2a_remote_m_blocks).
#pragma once

#include "xstage/gpu/host_device.hpp"

namespace xstage::sched {

struct AttnTile {
  int m_block;
  int head;
  int batch;
};

struct AttnTileScheduler {
  int num_m_blocks = 0;
  int num_heads = 0;
  int num_batch = 0;
  int first_m_blocks = 0;  // the first phase's m-blocks per (head, batch); 0 (or num_m_blocks): one phase

  constexpr AttnTileScheduler() = default;
  XSTAGE_HOST_DEVICE constexpr AttnTileScheduler(int seq_q, int block_m, int heads, int batch,
                                                 int first_phase_m_blocks = 0)
      : num_m_blocks((seq_q + block_m - 1) / block_m), num_heads(heads), num_batch(batch),
        first_m_blocks(first_phase_m_blocks > 0 && first_phase_m_blocks < (seq_q + block_m - 1) / block_m
                           ? first_phase_m_blocks
                           : 0) {}

  XSTAGE_HOST_DEVICE constexpr int num_tiles() const { return num_m_blocks * num_heads * num_batch; }

  XSTAGE_HOST_DEVICE constexpr AttnTile tile(int linear) const {
    int m_base = 0, m_count = num_m_blocks;
    if (first_m_blocks > 0) {
      const int first_tiles = first_m_blocks * num_heads * num_batch;
      if (linear < first_tiles) {
        m_count = first_m_blocks;
      } else {
        linear -= first_tiles;
        m_base = first_m_blocks;
        m_count = num_m_blocks - first_m_blocks;
      }
    }
    const int m_block = m_base + linear % m_count;
    const int rest = linear / m_count;
    return AttnTile{m_block, rest % num_heads, rest / num_heads};
  }

  // Whether tile number `linear` is the last tile of the CTA that runs it in a persistent grid of `grid`
  // CTAs (the kernel passes it to the epilogue, which finishes its asynchronous stores there).
  XSTAGE_HOST_DEVICE constexpr bool last_of_cta(int linear, int grid) const { return !valid(next_tile(linear, grid)); }

  XSTAGE_HOST_DEVICE constexpr int first_tile(int cta) const { return cta; }
  XSTAGE_HOST_DEVICE constexpr int next_tile(int current, int grid) const { return current + grid; }
  XSTAGE_HOST_DEVICE constexpr bool valid(int linear) const { return linear < num_tiles(); }

  // Persistent grid: one CTA per SM (the kernel's shared memory allows one), never more CTAs than tiles.
  static constexpr int grid_size(int num_tiles, int num_sms) {
    return num_tiles < num_sms ? (num_tiles > 0 ? num_tiles : 1) : num_sms;
  }
};

}  // namespace xstage::sched
