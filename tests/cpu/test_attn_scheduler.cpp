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
        const AttnTileScheduler s(seq, 128, heads, batch);
        ASSERT_EQ(s.num_m_blocks, (seq + 127) / 128);
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
        for (int c : seen) ASSERT_EQ(c, 1) << "seq " << seq << " heads " << heads << " batch " << batch;
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
