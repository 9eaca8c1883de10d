// The attention kernel's persistent tile scheduler and tile configuration, run on the CPU: the same
// functions the kernel calls.
#include <gtest/gtest.h>

#include <vector>

#include "xstage/sched/attn_tile_config.hpp"
#include "xstage/sched/attn_tile_scheduler.hpp"

namespace xstage::sched {
namespace {

TEST(AttnTileScheduler, EveryTileExactlyOnceAcrossThePersistentGrid) {
  for (int seq : {1, 127, 128, 129, 9450, 14850}) {
    for (int heads : {1, 3, 5, 12}) {
      for (int batch : {1, 2}) {
       const int m = (seq + 127) / 128;
       for (int first : {0, 1, m / 2, m - 1, m}) {
        const AttnTileScheduler s(seq, 128, heads, batch, first);
        ASSERT_EQ(s.num_m_blocks, m);
        const int grid = AttnTileScheduler::grid_size(s.num_tiles(), 132);
        std::vector<int> seen(size_t(s.num_tiles()), 0);
        int last = 0;
        for (int cta = 0; cta < grid; ++cta) {
          int final_tile = -1, flagged = -1;
          for (int t = s.first_tile(cta); s.valid(t); t = s.next_tile(t, grid)) {
            const AttnTile tile = s.tile(t);
            ASSERT_GE(tile.m_block, 0);
            ASSERT_LT(tile.m_block, s.num_m_blocks);
            ASSERT_LT(tile.head, heads);
            ASSERT_LT(tile.batch, batch);
            ++seen[size_t((tile.batch * heads + tile.head) * s.num_m_blocks + tile.m_block)];
            final_tile = t;
            if (s.last_of_cta(t, grid)) {
              ++last;
              flagged = t;
            }
          }
          ASSERT_EQ(last, cta + 1) << "one last tile per CTA";
          ASSERT_EQ(flagged, final_tile) << "the flagged tile is the CTA's final one";
        }
        for (int c : seen) ASSERT_EQ(c, 1) << "seq " << seq << " heads " << heads << " batch " << batch << " first " << first;
       }
      }
    }
  }
}

// Two phases: every tile of m-blocks [0, F) of every (head, batch) precedes every other tile; within a
// phase, m_block fastest (consecutive tiles share a head); F = 0 or F = num_m_blocks is the one-phase order.
TEST(AttnTileScheduler, FirstPhaseMBlocksPrecedeTheRest) {
  for (int seq : {129, 3077, 20033}) {
    for (int heads : {1, 3, 4}) {
      for (int batch : {1, 2}) {
        const AttnTileScheduler one(seq, 128, heads, batch);
        const int m = one.num_m_blocks;
        for (int first : {1, m / 2, m - 1}) {
          if (first < 1 || first >= m) continue;
          const AttnTileScheduler s(seq, 128, heads, batch, first);
          ASSERT_EQ(s.first_m_blocks, first);
          const int first_tiles = first * heads * batch;
          for (int t = 0; t < s.num_tiles(); ++t) {
            const AttnTile a = s.tile(t);
            EXPECT_EQ(a.m_block < first, t < first_tiles) << "tile " << t << " first " << first;
            if (t + 1 < s.num_tiles() && t + 1 != first_tiles) {
              const AttnTile b = s.tile(t + 1);
              const bool same_pair = a.head == b.head && a.batch == b.batch;
              EXPECT_TRUE(same_pair ? b.m_block == a.m_block + 1 : b.m_block == (t < first_tiles ? 0 : first))
                  << "tile " << t << " first " << first;
            }
          }
        }
        for (int first : {0, m, m + 5, -1}) {  // one phase
          const AttnTileScheduler s(seq, 128, heads, batch, first);
          EXPECT_EQ(s.first_m_blocks, 0);
          for (int t = 0; t < s.num_tiles(); ++t) {
            const AttnTile a = s.tile(t), b = one.tile(t);
            ASSERT_TRUE(a.m_block == b.m_block && a.head == b.head && a.batch == b.batch);
          }
        }
      }
    }
  }
}

TEST(AttnTileScheduler, GridNeverExceedsTilesOrSms) {
  EXPECT_EQ(AttnTileScheduler::grid_size(5, 132), 5);
  EXPECT_EQ(AttnTileScheduler::grid_size(1000, 132), 132);
  EXPECT_EQ(AttnTileScheduler::grid_size(0, 132), 1);
  EXPECT_EQ(AttnTileScheduler::paired_grid_size(6, 66), 6);
  EXPECT_EQ(AttnTileScheduler::paired_grid_size(1000, 66), 132);
  EXPECT_EQ(AttnTileScheduler::paired_grid_size(1000, 64), 128);  // what the device holds at once
  EXPECT_EQ(AttnTileScheduler::paired_grid_size(2, 0), 2);
}

// CTA pairs (2-CTA clusters multicasting K and V): in every round the two CTAs of a cluster hold
// adjacent m-blocks of one (head, batch), both run the same number of tiles, every real tile runs exactly
// once, and the only other tiles are one padding m-block per (head, batch), only where the count is odd.
TEST(AttnTileScheduler, PairedScheduleGivesEachClusterOneHeadPerRound) {
  for (int seq : {1, 127, 128, 129, 300, 9450, 14850, 75600}) {
    for (int heads : {1, 3, 5, 12}) {
      for (int batch : {1, 2}) {
        const int m = (seq + 127) / 128;
        const AttnTileScheduler s = AttnTileScheduler(seq, 128, heads, batch).paired();
        ASSERT_EQ(s.num_m_blocks, m + m % 2);
        ASSERT_FALSE(s.split());
        for (int clusters : {1, 3, 66}) {
          const int grid = AttnTileScheduler::paired_grid_size(s.num_tiles(), clusters);
          ASSERT_EQ(grid % 2, 0);
          ASSERT_LE(grid, 2 * clusters);
          ASSERT_LE(grid, s.num_tiles());
          std::vector<int> seen(size_t(batch * heads * m), 0);
          int padding = 0;
          for (int k = 0; k < grid / 2; ++k) {
            int t0 = s.first_tile(2 * k), t1 = s.first_tile(2 * k + 1);
            for (; s.valid(t0); t0 = s.next_tile(t0, grid), t1 = s.next_tile(t1, grid)) {
              ASSERT_TRUE(s.valid(t1)) << "both CTAs of a cluster run the same number of tiles";
              const AttnTile a = s.tile(t0), b = s.tile(t1);
              ASSERT_EQ(a.head, b.head);
              ASSERT_EQ(a.batch, b.batch);
              ASSERT_EQ(a.m_block % 2, 0);
              ASSERT_EQ(b.m_block, a.m_block + 1);
              ASSERT_EQ(s.last_of_cta(t0, grid), s.last_of_cta(t1, grid));
              for (const AttnTile& x : {a, b}) {
                if (x.m_block >= m) {
                  ASSERT_EQ(x.m_block, m) << "the padding m-block only";
                  ++padding;
                } else {
                  ++seen[size_t((x.batch * heads + x.head) * m + x.m_block)];
                }
              }
            }
            ASSERT_FALSE(s.valid(t1));
          }
          for (int v : seen) ASSERT_EQ(v, 1);
          ASSERT_EQ(padding, m % 2 * heads * batch);
        }
      }
    }
  }
}

TEST(AttnTileScheduler, ConsecutiveTilesShareHeadForL2Reuse) {
  const AttnTileScheduler s(8192, 128, 12, 1);
  const AttnTile a = s.tile(0), b = s.tile(63), c = s.tile(64);
  EXPECT_EQ(a.head, b.head);
  EXPECT_EQ(c.head, a.head + 1);
  EXPECT_EQ(c.m_block, 0);
}

// The split tail: every key block of every tile computed exactly once, every tile stored exactly once (by
// a whole unit or its owner), an owner's merge range is exactly the CTAs holding the rest of its tile,
// each CTA holds at most one helper segment and runs it before any owner segment (no wait depends on
// another wait), one last_store per CTA on its final storing unit, and the whole-tile rounds are the
// unsplit schedule's.
TEST(AttnTileScheduler, SplitTailCoversEveryKeyBlockOnceAndStoresEveryTileOnce) {
  int plans = 0;
  for (int seq : {8192, 9450, 14850, 16384, 32768, 3000}) {
    for (int heads : {1, 3, 5, 12}) {
      for (int grid : {132, 114, 7}) {
        for (int fixed : {0, 8}) {
          const int n = (seq + 127) / 128;
          const AttnTileScheduler one(seq, 128, heads, 1);
          const AttnTileScheduler s = one.with_split_tail(grid, n, fixed);
          if (one.num_tiles() <= grid || one.num_tiles() % grid == 0) EXPECT_FALSE(s.split());
          if (!s.split()) continue;
          ++plans;
          const int t_count = s.num_tiles();
          std::vector<int> blocks(size_t(t_count) * n, 0), stores(size_t(t_count), 0);
          std::vector<int> helper_of_cta(size_t(grid), -1);
          struct Owner { int tile, first, last, cta; };
          std::vector<Owner> owners;
          for (int cta = 0; cta < grid; ++cta) {
            const int units = s.num_units(cta, grid);
            int last_flags = 0, last_store_unit = -1, final_storing = -1;
            bool seen_owner = false;
            for (int i = 0; i < units; ++i) {
              const AttnWorkUnit u = s.unit(cta, i, grid);
              ASSERT_GE(u.tile, 0);
              ASSERT_LT(u.tile, t_count);
              const int b0 = u.role == AttnUnitRole::kWhole ? 0 : u.kb_begin;
              const int b1 = u.role == AttnUnitRole::kWhole ? n : u.kb_end;
              ASSERT_LT(b0, b1);
              for (int b = b0; b < b1; ++b) ++blocks[size_t(u.tile) * n + b];
              if (u.tile < s.tail_begin) {
                ASSERT_EQ(u.role, AttnUnitRole::kWhole);
                ASSERT_EQ(u.tile, one.first_tile(cta) + i * grid) << "whole rounds as unsplit";
              }
              if (u.role == AttnUnitRole::kHelper) {
                ASSERT_FALSE(seen_owner) << "helper before owner";
                ASSERT_EQ(helper_of_cta[size_t(cta)], -1) << "one helper per CTA";
                ASSERT_GT(u.kb_begin, 0);
                helper_of_cta[size_t(cta)] = u.tile;
              } else {
                ++stores[size_t(u.tile)];
                final_storing = i;
                if (u.role == AttnUnitRole::kOwner) {
                  seen_owner = true;
                  owners.push_back(Owner{u.tile, u.merge_first, u.merge_last, cta});
                }
              }
              if (u.last_store) {
                ++last_flags;
                last_store_unit = i;
              }
            }
            ASSERT_EQ(last_flags, 1) << "cta " << cta;
            ASSERT_EQ(last_store_unit, final_storing) << "cta " << cta;
          }
          for (int c : blocks) ASSERT_EQ(c, 1) << seq << "x" << heads << " grid " << grid;
          for (int c : stores) ASSERT_EQ(c, 1);
          for (const Owner& o : owners) {
            ASSERT_GT(o.first, o.cta);
            ASSERT_LE(o.first, o.last);
            for (int c = 0; c < grid; ++c) {
              EXPECT_EQ(helper_of_cta[size_t(c)] == o.tile, c >= o.first && c <= o.last) << "tile " << o.tile;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(plans, 20);
}

// The cost model splits where a tail leaves most CTAs idle and keeps the unsplit schedule where a split
// cannot pay for its second segment.
TEST(AttnTileScheduler, SplitTailWhereItShortensTheKernel) {
  const int f = attn_split_fixed_blocks(128);
  auto plan = [&](int seq, int heads) {
    return AttnTileScheduler(seq, 128, heads, 1).with_split_tail(132, (seq + 127) / 128, f, attn_split_penalty_pct(128));
  };
  EXPECT_TRUE(plan(8192, 5).split());    // 320 tiles: tail 56
  EXPECT_TRUE(plan(8192, 3).split());    // 192: tail 60
  EXPECT_TRUE(plan(14850, 5).split());   // 585: tail 57
  EXPECT_FALSE(plan(16384, 5).split());  // 640: tail 112 of 128-block tiles saves 1.5 %, under the penalty
  EXPECT_FALSE(plan(118800, 3).split()); // 2787: tail 15, 4 % of a 22-round kernel
  EXPECT_FALSE(plan(8192, 1).split());   // 64 tiles: one round
  EXPECT_FALSE(plan(16384, 33).split()); // 4224 tiles: 32 rounds, no tail
  EXPECT_FALSE(plan(1024, 132 + 130).split());  // 8-block tiles: a range plus a segment cost more than a tile
  const AttnTileScheduler s = plan(8192, 5);
  EXPECT_EQ(s.tail_begin, 264);
  EXPECT_EQ(s.num_units(0, 132), 2 + 1);  // two rounds, then blocks [0, 27) of tile 264 (56 x 64 / 132 = 27.2)
  const AttnWorkUnit u = s.unit(0, 2, 132);
  EXPECT_EQ(u.role, AttnUnitRole::kOwner);
  EXPECT_EQ(u.kb_end, 27);
  EXPECT_EQ(u.merge_first, 1);
  EXPECT_EQ(u.merge_last, 2);
}

TEST(AttnTileConfig, FitsSharedMemoryAndWarpgroups) {
  static_assert(attn_head_dim_supported(128));
  static_assert(attn_head_dim_supported(64));
  static_assert(!attn_head_dim_supported(96));
  constexpr AttnTileConfig c = attn_tile_config(128);
  static_assert(c.block_m == 64 * c.mma_warpgroups);
  static_assert(attn_smem_operand_bytes(128) <= 227 * 1024 - 1024);
  static_assert(attn_smem_operand_bytes(64) <= 227 * 1024 - 1024);
  EXPECT_EQ(c.block_n % 16, 0);
  // K and V blocks split evenly over a cluster's CTAs (each multicasts its share of the rows).
  static_assert(c.cluster_m == 1 || c.cluster_m == 2);
  static_assert(c.block_n % c.cluster_m == 0 && 128 % c.cluster_m == 0);
  static_assert(attn_tile_config(64).cluster_m == 1 && attn_fp8_tile_config(128).cluster_m == 1);
  // Q in registers where measured (bf16 d = 128); the FP8 kernel's s8 Q stays in shared memory.
  static_assert(c.q_in_regs && !attn_tile_config(64).q_in_regs && !attn_fp8_tile_config(128).q_in_regs);
}

}  // namespace
}  // namespace xstage::sched
