// gpu::ex2_poly3 (the FP8 softmax's exponential on the FMA pipe) against std::exp2: the error bound its
// header states, exactness at integers, and the clamp below 2^-125.
#include <gtest/gtest.h>

#include <cmath>

#include "xstage/gpu/ex2_poly.hpp"

namespace xstage::gpu {
namespace {

TEST(Ex2Poly3, RelativeErrorBelowTheStatedBoundOverTheSoftmaxRange) {
  // The FP8 softmax's arguments lie in [-inf, 8] (scores minus the running max, plus 2^8 headroom).
  double worst = 0.0;
  float worst_x = 0.f;
  for (int i = 0; i <= 2'000'000; ++i) {
    const float x = -125.f + 133.f * float(i) / 2'000'000.f;
    const double want = std::exp2(double(x));
    const double rel = std::fabs(double(ex2_poly3(x)) / want - 1.0);
    if (rel > worst) worst = rel, worst_x = x;
  }
  EXPECT_LT(worst, 1.2e-4) << "at x = " << worst_x;
  EXPECT_GT(worst, 5e-5) << "the cubic is not exact: a much smaller error means the test grid missed it";
}

TEST(Ex2Poly3, IntegersGiveExactPowersOfTwo) {
  for (int n = -125; n <= 8; ++n) EXPECT_EQ(ex2_poly3(float(n)), std::ldexp(1.f, n)) << "n = " << n;
}

TEST(Ex2Poly3, ClampsBelowTwoToTheMinus125) {
  EXPECT_EQ(ex2_poly3(-1000.f), std::ldexp(1.f, -125));
  EXPECT_EQ(ex2_poly3(-INFINITY), std::ldexp(1.f, -125));
  EXPECT_GT(ex2_poly3(-124.6f), 0.f);
}

}  // namespace
}  // namespace xstage::gpu
