// The FP8 attention's V^T key order (xstage/sched/attn_fp8_key_order.hpp) against the two register
// fragments it reconciles, each written here from the PTX ISA's wgmma fragment figures independently of
// the formula: the fp32 accumulator of S (m64nNk*: quad thread t holds columns 8c + 2t + {0, 1} of every
// 8-column chunk c) and the e4m3 A operand of P V (m64nNk32: quad thread t holds k = 4t + {0..3} in its
// first register pair and 16 + 4t + {0..3} in its second). acc_to_fp8_operand_a packs, for each thread,
// byte j of A half h from the accumulator's chunk 2h + j / 2, column pair j % 2.
#include <gtest/gtest.h>

#include <array>

#include "xstage/sched/attn_fp8_key_order.hpp"

namespace xstage::attn {
namespace {

// Column of S (within a 32-key group) of accumulator value (chunk c, pair p) of quad thread t.
int accumulator_column(int t, int c, int p) { return 8 * c + 2 * t + p; }
// k index (within a 32-key group) of A-operand value (half h, byte j) of quad thread t.
int operand_a_k(int t, int h, int j) { return 16 * h + 4 * t + j; }

TEST(AttnFp8KeyOrder, IsAPermutationOfEachGroup) {
  std::array<int, kFp8KeyGroup> seen{};
  for (int s = 0; s < kFp8KeyGroup; ++s) {
    const int key = fp8_key_of_slot(s);
    ASSERT_GE(key, 0);
    ASSERT_LT(key, kFp8KeyGroup);
    ++seen[key];
  }
  for (int n : seen) EXPECT_EQ(n, 1);
}

TEST(AttnFp8KeyOrder, SlotHoldsTheKeyWhoseProbabilityTheRegistersPutThere) {
  // P V is exact when the V^T row at each k index the GMMA reads holds the key whose p sits at that k in
  // the A registers: fp8_key_of_slot(k) == the accumulator column packed into that byte.
  for (int t = 0; t < 4; ++t) {
    for (int h = 0; h < 2; ++h) {
      for (int j = 0; j < 4; ++j) {
        const int column = accumulator_column(t, 2 * h + j / 2, j % 2);
        EXPECT_EQ(fp8_key_of_slot(operand_a_k(t, h, j)), column) << "t " << t << " half " << h << " byte " << j;
      }
    }
  }
}

TEST(AttnFp8KeyOrder, EveryThreadKeepsItsOwnKeys) {
  // The eight keys a thread's A bytes stand for are exactly the eight columns its accumulator holds:
  // no value crosses threads.
  for (int t = 0; t < 4; ++t) {
    std::array<int, kFp8KeyGroup> mine{};
    for (int c = 0; c < 4; ++c)
      for (int p = 0; p < 2; ++p) mine[accumulator_column(t, c, p)] = 1;
    for (int h = 0; h < 2; ++h)
      for (int j = 0; j < 4; ++j) EXPECT_EQ(mine[fp8_key_of_slot(operand_a_k(t, h, j))], 1);
  }
}

}  // namespace
}  // namespace xstage::attn
