// The Ulysses post-attention All-to-All mapping (src/ulysses/a2a_params.hpp), which the fused epilogue,
// the A2A kernel and the host layer share: sharding, row owners, and the own-rows-last query order.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "../../src/ulysses/a2a_params.hpp"

namespace xstage::attn {
namespace {

const int kSeqs[] = {2, 3, 7, 127, 128, 129, 200, 1000, 3077, 4096, 20033, 32656, 118800};

TEST(UlyssesMapping, ShardsCoverTheSequenceOnce) {
  for (int world = 1; world <= kA2AMaxRanks; ++world) {
    for (int seq : kSeqs) {
      if (seq < world || a2a_local_len(seq, world, world - 1) < 1) continue;  // rejected by the layer
      const int shard = a2a_shard_len(seq, world);
      int total = 0;
      for (int r = 0; r < world; ++r) {
        EXPECT_GE(a2a_local_len(seq, world, r), 1);
        total += a2a_local_len(seq, world, r);
      }
      EXPECT_EQ(total, seq) << "seq " << seq << " world " << world;
      std::vector<std::vector<int>> hits(world);
      for (int r = 0; r < world; ++r) hits[r].assign(a2a_local_len(seq, world, r), 0);
      for (int g = 0; g < seq; ++g) {
        const A2ARowOwner o = a2a_row_owner(g, shard);
        ASSERT_GE(o.owner, 0);
        ASSERT_LT(o.owner, world);
        ASSERT_LT(o.local_row, a2a_local_len(seq, world, o.owner)) << "seq " << seq << " row " << g;
        ++hits[o.owner][o.local_row];
      }
      for (const auto& h : hits)
        for (int c : h) EXPECT_EQ(c, 1);
    }
  }
}

// Under the own-rows-last rotation, the first a2a_remote_m_blocks m-blocks each hold at least one other
// owner's row and every later m-block holds only the rank's own rows (the remote-first tile order).
TEST(UlyssesMapping, RemoteMBlocksHoldEveryOtherOwnersRow) {
  for (int world = 1; world <= kA2AMaxRanks; ++world) {
    for (int seq : kSeqs) {
      if (seq < world || a2a_local_len(seq, world, world - 1) < 1) continue;
      const int shard = a2a_shard_len(seq, world);
      for (int block_m : {64, 128}) {
        for (int r = 0; r < world; ++r) {
          const int rot = a2a_own_rows_last_rotation(seq, world, r);
          const int f = a2a_remote_m_blocks(seq, world, r, block_m);
          const int m_blocks = (seq + block_m - 1) / block_m;
          ASSERT_GE(f, 0);
          ASSERT_LE(f, m_blocks);
          if (world == 1) EXPECT_EQ(f, 0);
          for (int mb = 0; mb < m_blocks; ++mb) {
            bool remote = false;
            for (int i = mb * block_m; i < std::min(seq, (mb + 1) * block_m); ++i)
              remote |= a2a_row_owner(a2a_sequence_row(i, rot, seq), shard).owner != r;
            EXPECT_EQ(remote, mb < f) << "seq " << seq << " world " << world << " rank " << r << " m-block " << mb;
          }
        }
      }
    }
  }
}

// The final round's remote bytes, by hand: M = 16384, 4 heads, 2 ranks, 132 CTAs: 512 tiles, the final
// round is tiles 396..511 = head 3, m-blocks 12..127; under own-last m-blocks 0..63 hold the other rank's
// rows, so 52 whole remote tiles end the kernel; remote-first moves all 256 remote tiles into the first
// 256 (rounds 0-1) and the final round stores locally. One rank: nothing remote.
TEST(UlyssesMapping, FinalRoundRemoteBytes) {
  const int seq = 16384, heads = 4, d = 128, grid = 132;
  for (int r = 0; r < 2; ++r) {
    const int rot = a2a_own_rows_last_rotation(seq, 2, r);
    const sched::AttnTileScheduler own_last(seq, 128, heads, 1);
    EXPECT_EQ(a2a_final_round_remote_bytes(own_last, grid, 128, seq, 2, r, rot, d), int64_t(52) * 128 * d * 2);
    const sched::AttnTileScheduler remote_first(seq, 128, heads, 1, a2a_remote_m_blocks(seq, 2, r, 128));
    EXPECT_EQ(a2a_final_round_remote_bytes(remote_first, grid, 128, seq, 2, r, rot, d), 0);
    // Natural order: rank 0's final round (head 3, m-blocks 12..127) holds rank 1's m-blocks 64..127.
    EXPECT_EQ(a2a_final_round_remote_bytes(own_last, grid, 128, seq, 2, r, 0, d),
              int64_t(r == 0 ? 64 : 52) * 128 * d * 2);
  }
  const sched::AttnTileScheduler one(seq, 128, heads, 1);
  EXPECT_EQ(a2a_final_round_remote_bytes(one, grid, 128, seq, 1, 0, 0, d), 0);
  // A ragged straddling tile counts its remote rows only: 200 rows, 1 head, 2 ranks, one tile per CTA
  // (grid 2, a single round): rank 0 owns rows 0..99, the two tiles hold rows 100..199 of rank 1.
  const sched::AttnTileScheduler small(200, 128, 1, 1);
  EXPECT_EQ(a2a_final_round_remote_bytes(small, 2, 128, 200, 2, 0, 0, d), int64_t(100) * d * 2);
}

TEST(UlyssesMapping, OwnRowsLastIsAPermutationEndingWithTheRanksShard) {
  for (int world = 1; world <= kA2AMaxRanks; ++world) {
    for (int seq : kSeqs) {
      if (seq < world || a2a_local_len(seq, world, world - 1) < 1) continue;
      const int shard = a2a_shard_len(seq, world);
      for (int r = 0; r < world; ++r) {
        const int rot = a2a_own_rows_last_rotation(seq, world, r);
        std::vector<int> seen(seq, 0);
        int prev_owner = -1;
        std::vector<int> runs(world, 0);  // each owner's rows form one contiguous run (one NCCL chunk)
        for (int i = 0; i < seq; ++i) {
          const int g = a2a_sequence_row(i, rot, seq);
          ASSERT_GE(g, 0);
          ASSERT_LT(g, seq);
          ++seen[g];
          const int owner = a2a_row_owner(g, shard).owner;
          if (owner != prev_owner) ++runs[owner];
          prev_owner = owner;
          if (i >= seq - a2a_local_len(seq, world, r)) EXPECT_EQ(owner, r) << "seq " << seq << " rank " << r << " row " << i;
          if (i > 0 && owner == a2a_row_owner(a2a_sequence_row(i - 1, rot, seq), shard).owner) {
            EXPECT_EQ(g, a2a_sequence_row(i - 1, rot, seq) + 1);  // in sequence order within a shard
          }
        }
        for (int c : seen) EXPECT_EQ(c, 1);
        for (int c : runs) EXPECT_EQ(c, 1) << "seq " << seq << " world " << world << " rank " << r;
      }
    }
  }
}

TEST(UlyssesMapping, TileMayStraddleTwoOwners) {
  // 3077 rows on 2 ranks: shard 1539; query tile 12 (rows 1536..1663) holds rows of both owners.
  const int shard = a2a_shard_len(3077, 2);
  EXPECT_EQ(shard, 1539);
  EXPECT_EQ(a2a_row_owner(1536, shard).owner, 0);
  EXPECT_EQ(a2a_row_owner(1663, shard).owner, 1);
  EXPECT_EQ(a2a_row_owner(1539, shard).local_row, 0);
  EXPECT_EQ(a2a_local_len(3077, 2, 1), 1538);
}

}  // namespace
}  // namespace xstage::attn
