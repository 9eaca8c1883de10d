// The statistics of measured samples (xstage/model/stats.hpp): values on small sets worked by hand, and the
// one behaviour of an empty set (NaN, written as null in JSON) for every statistic; the seed rule and printf
// of the bench host (bench_host.hpp).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <sstream>
#include <vector>

#include "xstage/testing/bench_host.hpp"
#include "xstage/model/stats.hpp"

namespace t = xstage::testing;
namespace st = xstage::stats;

TEST(BenchStats, EmptySetIsNanForEveryStatistic) {
  const std::vector<double> none;
  EXPECT_TRUE(std::isnan(st::median_or_nan(none)));
  EXPECT_TRUE(std::isnan(st::percentile(none, 0.9)));
  EXPECT_TRUE(std::isnan(st::mean(none)));
  EXPECT_TRUE(std::isnan(st::stdev(none)));
  EXPECT_TRUE(std::isnan(st::min(none)));
  EXPECT_TRUE(std::isnan(st::max(none)));
  const st::SampleStats s = st::summarize(none);
  EXPECT_EQ(s.count, 0u);
  for (double x : {s.median, s.p10, s.p90, s.mean, s.stdev, s.min, s.max}) EXPECT_TRUE(std::isnan(x));
  // What a result file then holds: no value, not a measured zero.
  const nlohmann::json j = {{"median_us", st::median_or_nan(none)}};
  EXPECT_EQ(j.dump(), "{\"median_us\":null}");
}

TEST(BenchStats, MedianOfOddAndEvenCounts) {
  EXPECT_DOUBLE_EQ(st::median_or_nan(std::vector<double>{3, 1, 2}), 2.0);
  EXPECT_DOUBLE_EQ(st::median_or_nan(std::vector<double>{4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(st::median_or_nan(std::vector<double>{7}), 7.0);
}

TEST(BenchStats, PercentileIsTheNearestRankSample) {
  const std::vector<double> v = {50, 10, 40, 20, 30};  // sorted 10 20 30 40 50
  EXPECT_DOUBLE_EQ(st::percentile(v, 0.0), 10.0);
  EXPECT_DOUBLE_EQ(st::percentile(v, 0.1), 10.0);  // round(0.4) = 0
  EXPECT_DOUBLE_EQ(st::percentile(v, 0.9), 50.0);  // round(3.6) = 4
  EXPECT_DOUBLE_EQ(st::percentile(v, 0.5), 30.0);
  EXPECT_DOUBLE_EQ(st::percentile(v, 1.0), 50.0);
  EXPECT_DOUBLE_EQ(st::percentile(v, 7.0), 50.0) << "q above 1 is clamped";
  EXPECT_DOUBLE_EQ(st::percentile(v, -1.0), 10.0) << "q below 0 is clamped";
  EXPECT_DOUBLE_EQ(st::percentile(std::vector<double>{1, 2, 3, 4}, 0.5), 3.0) << "round(1.5) = 2";
}

TEST(BenchStats, MeanStdevMinMax) {
  const std::vector<double> v = {2, 4, 4, 4, 5, 5, 7, 9};
  EXPECT_DOUBLE_EQ(st::mean(v), 5.0);
  EXPECT_NEAR(st::stdev(v), std::sqrt(32.0 / 7.0), 1e-12);  // sample standard deviation
  EXPECT_DOUBLE_EQ(st::stdev(std::vector<double>{3}), 0.0);
  EXPECT_DOUBLE_EQ(st::min(v), 2.0);
  EXPECT_DOUBLE_EQ(st::max(v), 9.0);
  const st::SampleStats s = st::summarize(v);
  EXPECT_EQ(s.count, v.size());
  EXPECT_DOUBLE_EQ(s.median, 4.5);
  EXPECT_DOUBLE_EQ(s.p90, 7.0);  // sorted[round(6.3)]
  EXPECT_DOUBLE_EQ(s.p10, 4.0);  // sorted[round(0.7)]
}

TEST(BenchHost, SeedAndPrintf) {
  EXPECT_EQ(t::resolve_seed(0), 0u);
  EXPECT_EQ(t::resolve_seed(12345), 12345u);
  std::ostringstream out;
  t::print_to(out, "%s %.2e %d", "rel_l2", 1.5e-3, 7);
  EXPECT_EQ(out.str(), "rel_l2 1.50e-03 7");
}
