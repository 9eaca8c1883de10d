// Receive layout of the fused MoE (include/xstage/moe/moe_fused_layout.hpp): every source's rows of
// every expert land in disjoint rows of the owner's buffer, inside the expert's own row blocks, in
// source order; capacity covers any routing; origin records round-trip.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include "xstage/moe/moe_fused_layout.hpp"

namespace {

using namespace xstage::moe;

TEST(MoeFusedLayout, RowsAreDisjointAndInsideTheirExpertsBlocks) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    const int ranks = 1 + int(rng() % 4), el = 1 + int(rng() % 6), experts = ranks * el;
    std::vector<int> counts(size_t(ranks) * experts);
    for (auto& c : counts) c = rng() % 4 == 0 ? 0 : int(rng() % 300);
    for (int o = 0; o < ranks; ++o) {
      std::vector<int> totals(el), offsets(el + 1);
      for (int l = 0; l < el; ++l) totals[l] = expert_total_rows(counts.data(), ranks, experts, o * el + l);
      owner_block_offsets(totals.data(), el, kFusedBlockM, offsets.data());
      std::set<long long> used;
      for (int l = 0; l < el; ++l) {
        const int e = o * el + l;
        EXPECT_EQ(offsets[l + 1] - offsets[l], row_blocks(totals[l], kFusedBlockM));
        long long prev = -1;
        for (int s = 0; s < ranks; ++s) {
          for (int pos = 0; pos < counts[size_t(s) * experts + e]; ++pos) {
            const long long row = recv_row(counts.data(), ranks, experts, kFusedBlockM, s, e, pos);
            EXPECT_TRUE(used.insert(row).second) << "row " << row << " used twice";
            EXPECT_GE(row, (long long)offsets[l] * kFusedBlockM);
            EXPECT_LT(row, (long long)offsets[l] * kFusedBlockM + totals[l]);
            EXPECT_GT(row, prev);  // source order, then slot order
            prev = row;
          }
        }
      }
      // Any routing fits: sources send at most tokens·min(top_k, el) rows each to one owner.
      int max_per_source = 0;
      for (int s = 0; s < ranks; ++s) {
        int n = 0;
        for (int l = 0; l < el; ++l) n += counts[size_t(s) * experts + o * el + l];
        max_per_source = std::max(max_per_source, n);
      }
      EXPECT_LE((long long)offsets[el] * kFusedBlockM, recv_capacity_rows(ranks, max_per_source, 1, el, kFusedBlockM));
    }
  }
}

TEST(MoeFusedLayout, DispatchOrderVisitsEveryExpertOnce) {
  const int ranks = 3, el = 5;
  std::set<int> seen;
  for (int q = 0; q < ranks * el; ++q) {
    const int e = dispatch_block_expert(q, ranks, el);
    EXPECT_EQ(e % el, q / ranks);  // local expert order first: every owner's first experts go out first
    EXPECT_TRUE(seen.insert(e).second);
  }
  EXPECT_EQ(int(seen.size()), ranks * el);
}

TEST(MoeFusedLayout, OriginRoundTrips) {
  for (int src : {0, 1, 7})
    for (int slot : {0, 1, 12345, (1 << kOriginSlotBits) - 1}) {
      EXPECT_EQ(moe_origin_rank(moe_origin(src, slot)), src);
      EXPECT_EQ(moe_origin_slot(moe_origin(src, slot)), slot);
    }
}

}  // namespace
