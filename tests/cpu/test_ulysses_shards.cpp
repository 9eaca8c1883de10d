// Shard arithmetic of the Ulysses attention API (include/xstage/ulysses/shards.hpp), which the C ABI and the
// Python layer's checks call: the accepted split is torch.chunk's (checked against chunk's own definition),
// torch.tensor_split's differs except when seq % world is 0 or world - 1 and is refused with its name, the
// rotated Q placement of the pre-attention All-to-All covers every kernel row once with shards contiguous,
// and joint rows (after seq in K and V) have no owner among the sequence's shards.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "xstage/ulysses/shards.hpp"

namespace xstage::ulysses {
namespace {

// torch.chunk(n, world) along the sequence: chunks of ceil(n / world), as many as needed (possibly fewer
// than world), the last the rest. Written from torch's documentation, independently of shards.hpp.
std::vector<int64_t> torch_chunk(int64_t n, int world) {
  const int64_t c = (n + world - 1) / world;
  std::vector<int64_t> out;
  for (int64_t start = 0; start < n; start += c) out.push_back(std::min(c, n - start));
  return out;
}

// torch.tensor_split(n, world): the first n % world sections one longer.
std::vector<int64_t> torch_tensor_split(int64_t n, int world) {
  std::vector<int64_t> out;
  for (int r = 0; r < world; ++r) out.push_back(n / world + (r < n % world ? 1 : 0));
  return out;
}

TEST(UlyssesShards, AcceptedSplitIsTorchChunk) {
  for (int world = 1; world <= 8; ++world) {
    for (int64_t seq = 1; seq <= 300; ++seq) {
      const std::vector<int64_t> chunk = torch_chunk(seq, world);
      const bool full = int(chunk.size()) == world;
      std::vector<int64_t> ours;
      for (int r = 0; r < world; ++r) ours.push_back(seq >= world ? attn::a2a_local_len(int(seq), world, r) : 0);
      if (full) {
        EXPECT_EQ(ours, chunk) << "seq " << seq << " world " << world;
        EXPECT_EQ(ulysses_split_error(chunk), "") << "seq " << seq << " world " << world;
      } else {
        // torch.chunk gives fewer than world chunks: some rank would get nothing, refused.
        EXPECT_NE(ulysses_split_error(ours), "") << "seq " << seq << " world " << world;
        EXPECT_NE(ulysses_local_len_error(seq, world, world - 1, ours[world - 1]), "");
      }
    }
  }
}

TEST(UlyssesShards, TensorSplitAcceptedOnlyWhereItEqualsChunk) {
  for (int world = 2; world <= 8; ++world) {
    for (int64_t seq = world; seq <= 200; ++seq) {
      const std::vector<int64_t> ts = torch_tensor_split(seq, world);
      for (int r = 0; r < world; ++r) EXPECT_EQ(tensor_split_len(seq, world, r), ts[r]);
      const bool same = ts == torch_chunk(seq, world);
      const std::string why = ulysses_split_error(ts);
      EXPECT_EQ(why.empty(), same) << "seq " << seq << " world " << world << ": " << why;
      if (same) {
        EXPECT_TRUE(seq % world == 0 || seq % world == world - 1) << "seq " << seq << " world " << world;
      }
      if (!why.empty() && int(torch_chunk(seq, world).size()) == world) {
        EXPECT_NE(why.find("tensor_split"), std::string::npos) << why;
      }
    }
  }
}

TEST(UlyssesShards, MessagesNameTheRankAndTheLengths) {
  // 10 rows over 4 ranks: chunk gives 3, 3, 3, 1; tensor_split 3, 3, 2, 2 (rank 2 differs first).
  const std::string why = ulysses_split_error({3, 3, 2, 2});
  EXPECT_NE(why.find("rank 2 holds 2 of 10 rows"), std::string::npos) << why;
  EXPECT_NE(why.find("3 on this rank"), std::string::npos) << why;
  EXPECT_NE(ulysses_local_len_error(10, 4, 4, 1).find("rank 4"), std::string::npos);
  EXPECT_NE(ulysses_local_len_error(3, 4, 0, 1).find("seq 3"), std::string::npos);
  // 5 rows over 4 ranks: ceil = 2 leaves the last rank nothing (torch.chunk makes 3 chunks).
  EXPECT_NE(ulysses_local_len_error(5, 4, 0, 2).find("rank 3 of 4 no rows"), std::string::npos);
  EXPECT_EQ(ulysses_heads_error(24, 4), "");
  EXPECT_NE(ulysses_heads_error(24, 5).find("heads 24 not divisible by the world size 5"), std::string::npos);
  EXPECT_NE(ulysses_heads_error(0, 1), "");
}

TEST(UlyssesShards, RotatedQPlacementCoversEveryRowOnce) {
  for (int world = 1; world <= 8; ++world) {
    for (int seq = world; seq <= 260; seq += 7) {
      if (attn::a2a_local_len(seq, world, world - 1) < 1) continue;
      const int shard = attn::a2a_shard_len(seq, world);
      for (int rank = 0; rank < world; ++rank) {
        const int rot = attn::a2a_own_rows_last_rotation(seq, world, rank);
        std::vector<int> hits(seq, 0);
        for (int p = 0; p < world; ++p) {
          const int start = attn::a2a_rotated_shard_start(p, shard, rot, seq);
          const int n = attn::a2a_local_len(seq, world, p);
          ASSERT_LE(start + n, seq) << "peer " << p << " wraps: its chunk must stay contiguous";
          for (int i = 0; i < n; ++i) {
            ++hits[start + i];
            // Kernel row start + i is the peer's sequence row p * shard + i, owned by p.
            const int g = attn::a2a_sequence_row(start + i, rot, seq);
            EXPECT_EQ(g, p * shard + i);
            EXPECT_EQ(attn::a2a_row_owner(g, shard).owner, p);
          }
        }
        for (int i = 0; i < seq; ++i) ASSERT_EQ(hits[i], 1) << "seq " << seq << " world " << world << " row " << i;
        // Own rows last: the rank's own shard ends the kernel's row order.
        EXPECT_EQ(attn::a2a_rotated_shard_start(rank, shard, rot, seq), seq - attn::a2a_local_len(seq, world, rank));
      }
    }
  }
}

TEST(UlyssesShards, JointRowsFollowTheSequenceAndHaveNoOwner) {
  // K and V of the attention are [seq + joint] rows: the sequence's rows (shards in order) then the replicated
  // joint rows; only the seq query rows are stored to owners, so the owners' rows sum to seq, never seq + joint.
  for (int world : {1, 2, 3, 8}) {
    for (int seq : {world, 77, 1000, 4096 + 5}) {
      if (attn::a2a_local_len(seq, world, world - 1) < 1) continue;
      const int shard = attn::a2a_shard_len(seq, world);
      int64_t owned = 0;
      for (int p = 0; p < world; ++p) owned += attn::a2a_local_len(seq, world, p);
      EXPECT_EQ(owned, seq);
      // The first K row after the sequence (the first joint row) maps past the last owner's shard.
      const attn::A2ARowOwner o = attn::a2a_row_owner(seq, shard);
      EXPECT_TRUE(o.owner >= world || o.local_row >= attn::a2a_local_len(seq, world, o.owner));
    }
  }
}

}  // namespace
}  // namespace xstage::ulysses
