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
}

TEST(AttnTileScheduler, ConsecutiveTilesShareHeadForL2Reuse) {
  const AttnTileScheduler s(8192, 128, 12, 1);
  const AttnTile a = s.tile(0), b = s.tile(63), c = s.tile(64);
  EXPECT_EQ(a.head, b.head);
  EXPECT_EQ(c.head, a.head + 1);
  EXPECT_EQ(c.m_block, 0);
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
}

}  // namespace
}  // namespace xstage::sched
