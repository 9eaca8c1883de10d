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
//
// Split tail (with_split_tail; the local forward with a workspace): T tiles on G CTAs are W = T / G full
// rounds and a tail of r = T % G tiles, which leaves G - r CTAs idle for a whole tile: at 8192 x 5
// (320 tiles on 132 SMs) the tail is 56 tiles and the kernel runs 3 tile times for 2.42 tiles of work.
// The split plan runs the W rounds as above and spreads the tail's r x N key blocks (N per tile)
// evenly over all G CTAs: CTA c takes the blocks [c L / G, (c + 1) L / G) of the tail (L = r N, the
// tail's blocks numbered tile by tile). Since r < G a range is shorter than a tile, so it holds at most
// two segments: the end of one tile and the start of the next. A segment starting at a tile's block 0
// is the tile's owner; the others are helpers, each the first tail segment of its CTA, so a CTA holds at
// most one helper segment (its partial result's slot is the CTA's index). A helper writes its rows'
// unnormalized output, row max and row sum to its slot and raises a flag; the owner waits for the flags
// of its helpers (the CTAs merge_first .. merge_last), merges their partials in CTA order (a fixed order:
// the result does not depend on timing) and stores the tile. Helpers never wait, and a CTA runs its
// helper segment before its owner segment, so no wait depends on another wait: the grid cannot deadlock
// as long as every CTA eventually runs (a persistent grid of at most one CTA per SM).
#pragma once

#include <cstdint>

#include "xstage/gpu/host_device.hpp"

namespace xstage::sched {

struct AttnTile {
  int m_block;
  int head;
  int batch;
};

// What a CTA computes for one tile: all of its key blocks (kWhole), or a segment of a split tile.
enum class AttnUnitRole : int {
  kWhole = 0,   // keys [0, N): normalize and store
  kHelper = 1,  // keys [kb_begin, kb_end), kb_begin > 0: write the partial result to this CTA's slot
  kOwner = 2,   // keys [0, kb_end): merge the partials of CTAs merge_first .. merge_last, then store
};

struct AttnWorkUnit {
  int tile;  // linear tile number (AttnTileScheduler::tile)
  AttnUnitRole role;
  int kb_begin, kb_end;  // key blocks of a split segment; kWhole: 0 and 0 (the caller knows N)
  int merge_first, merge_last;  // kOwner: the helper CTAs whose partials complete the tile
  bool last_store;  // no later unit of this CTA stores a tile (the epilogue's last_of_cta)
};

struct AttnTileScheduler {
  int num_m_blocks = 0;
  int num_heads = 0;
  int num_batch = 0;
  int first_m_blocks = 0;  // the first phase's m-blocks per (head, batch); 0 (or num_m_blocks): one phase
  // Split tail (with_split_tail): 0 in a plan without one.
  int split_grid = 0;   // G, the grid the plan was made for
  int key_blocks = 0;   // N, key blocks per tile
  int tail_begin = 0;   // W x G: the first tile of the tail

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

  XSTAGE_HOST_DEVICE constexpr bool split() const { return split_grid > 0; }

  // The schedule for CTA pairs (2-CTA clusters, sched::AttnTileConfig::cluster_m = 2; one phase, no split
  // tail): m-blocks per (head, batch) rounded up to even. In a grid of an even number G of CTAs the two
  // CTAs of cluster k, 2k and 2k + 1, then take tiles 2k + iG and 2k + 1 + iG: adjacent m-blocks of one
  // (head, batch) in every round (so their K and V blocks are the same), and both the same number of
  // tiles. The padding m-block (num_m_blocks - 1 when the count was odd) holds no query row: its tile
  // computes on TMA's zero fill of Q and stores nothing (the epilogue keeps rows below seq_q), one tile in
  // ceil(seq_q / block_m) of each head.
  constexpr AttnTileScheduler paired() const {
    AttnTileScheduler s = *this;
    s.num_m_blocks += s.num_m_blocks % 2;
    return s;
  }

  // The same schedule with its tail split over `grid` CTAs (see top), when that shortens the kernel by at
  // least 3 %. In key blocks: unsplit, a CTA runs W + 1 tiles of N + F (F = fixed_blocks: what a tile costs
  // outside its key blocks); split, W tiles, ceil(L / G) tail blocks, a second segment's F and a merge
  // (one block), all penalty_pct % slower (the split kernel's measured per-tile cost; docs/attn_notes.md,
  // round 8). Not split: one round or less (T <= G, no CTA would be left without a whole tile), no tail,
  // a tail range under two blocks, or too little gain.
  constexpr AttnTileScheduler with_split_tail(int grid, int blocks_per_tile, int fixed_blocks,
                                              int penalty_pct = 0) const {
    AttnTileScheduler s = *this;
    const int t = num_tiles();
    if (grid < 2 || blocks_per_tile < 2 || t <= grid || t % grid == 0) return s;
    const int64_t tail_blocks = int64_t(t % grid) * blocks_per_tile;
    if (tail_blocks / grid < 2) return s;
    const int64_t per_cta = (tail_blocks + grid - 1) / grid;
    const int64_t rounds = t / grid, tile_cost = blocks_per_tile + fixed_blocks;
    const int64_t whole_cost = (rounds + 1) * tile_cost;
    const int64_t split_cost = rounds * tile_cost + per_cta + 2 * fixed_blocks + 1;
    // split_cost x (1 + penalty) <= 0.97 x whole_cost, in integers.
    if (split_cost * (100 + penalty_pct) * 100 > whole_cost * 97 * 100) return s;
    s.split_grid = grid;
    s.key_blocks = blocks_per_tile;
    s.tail_begin = t - t % grid;
    return s;
  }

  // The tail's blocks [begin(c), begin(c + 1)) belong to CTA c; the CTA holding tail block x.
  XSTAGE_HOST_DEVICE constexpr int64_t tail_block_begin(int cta) const {
    return int64_t(cta) * tail_length() / split_grid;
  }
  XSTAGE_HOST_DEVICE constexpr int cta_of_tail_block(int64_t x) const {
    return int(((x + 1) * split_grid - 1) / tail_length());
  }
  XSTAGE_HOST_DEVICE constexpr int64_t tail_length() const {
    return int64_t(num_tiles() - tail_begin) * key_blocks;
  }

  // The work units of CTA `cta` in a grid of `grid` (the plan's split_grid when split), in the order the
  // CTA runs them: its whole tiles, then (split) its tail segments.
  XSTAGE_HOST_DEVICE constexpr int num_units(int cta, int grid) const {
    if (!split()) return cta < num_tiles() ? (num_tiles() - 1 - cta) / grid + 1 : 0;
    const int whole = tail_begin / grid;
    const int64_t a = tail_block_begin(cta), b = tail_block_begin(cta + 1);
    if (a == b) return whole;
    return whole + ((b - 1) / key_blocks != a / key_blocks ? 2 : 1);
  }

  // Whether one of CTA `cta`'s tail segments starts at a tile's block 0 (an owner's or a whole tile's).
  XSTAGE_HOST_DEVICE constexpr bool tail_stores(int cta) const {
    const int64_t a = tail_block_begin(cta), b = tail_block_begin(cta + 1);
    return a < b && (a % key_blocks == 0 || (b - 1) / key_blocks != a / key_blocks);
  }

  XSTAGE_HOST_DEVICE constexpr AttnWorkUnit unit(int cta, int i, int grid) const {
    const int n = num_units(cta, grid);
    const int whole = split() ? tail_begin / grid : n;
    if (i < whole) {
      const bool last = i == n - 1 || (i == whole - 1 && !tail_stores(cta));
      return AttnWorkUnit{cta + i * grid, AttnUnitRole::kWhole, 0, 0, 0, 0, last};
    }
    const int64_t a = tail_block_begin(cta), b = tail_block_begin(cta + 1);
    // The segment: the first one starts at a, the second at the next tile's block 0.
    const int64_t seg_begin = i == whole ? a : ((a / key_blocks) + 1) * key_blocks;
    const int64_t tile_in_tail = seg_begin / key_blocks;
    const int64_t tile_end = (tile_in_tail + 1) * key_blocks;
    const int64_t seg_end = b < tile_end ? b : tile_end;
    const int kb_begin = int(seg_begin - tile_in_tail * key_blocks);
    const int kb_end = int(seg_end - tile_in_tail * key_blocks);
    const int t = tail_begin + int(tile_in_tail);
    if (kb_begin > 0) return AttnWorkUnit{t, AttnUnitRole::kHelper, kb_begin, kb_end, 0, 0, false};
    if (kb_end == key_blocks) return AttnWorkUnit{t, AttnUnitRole::kWhole, 0, 0, 0, 0, true};
    return AttnWorkUnit{t, AttnUnitRole::kOwner, 0, kb_end, cta + 1, cta_of_tail_block(tile_end - 1), true};
  }

  // Persistent grid: one CTA per SM (the kernel's shared memory allows one), never more CTAs than tiles.
  static constexpr int grid_size(int num_tiles, int num_sms) {
    return num_tiles < num_sms ? (num_tiles > 0 ? num_tiles : 1) : num_sms;
  }
  // The paired schedule's grid: `clusters` CTA pairs resident at once (what the device holds), never more
  // CTAs than its (even) number of tiles; even.
  static constexpr int paired_grid_size(int num_tiles, int clusters) {
    const int g = 2 * (clusters > 0 ? clusters : 1);
    return num_tiles < g ? (num_tiles > 2 ? num_tiles / 2 * 2 : 2) : g;
  }
};

}  // namespace xstage::sched
