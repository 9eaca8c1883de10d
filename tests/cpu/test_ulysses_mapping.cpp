// The Ulysses post-attention All-to-All mapping (src/attn/a2a_params.hpp), which the fused epilogue,
// the A2A kernel and the host layer share: sharding, row owners, and the own-rows-last query order.
#include <gtest/gtest.h>

#include <vector>

#include "../../src/attn/a2a_params.hpp"

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
