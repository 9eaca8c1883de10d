// Statistics of benchmark samples (times, rates, per-tile spans): the one set every bench and its JSON
// use.
//
// An empty set has no median, percentile, mean, spread or extreme: every statistic of it is NaN (JSON
// writes it as null), never 0, which would read as a measured zero. The statistics of a non-empty set are
// the usual ones: the median averages the two middle values of an even count (xstage::stats::median), a
// percentile is the nearest-rank sample sorted[round(q·(n-1))], the standard deviation is the sample one
// (n-1 in the denominator; 0 for one sample).
#pragma once

#include <cstddef>
#include <span>

namespace xstage::testing {

double median(std::span<const double> v);
// q in [0, 1]; outside that range it is clamped.
double percentile(std::span<const double> v, double q);
double mean(std::span<const double> v);
double stdev(std::span<const double> v);
double min(std::span<const double> v);
double max(std::span<const double> v);

struct SampleStats {
  std::size_t count = 0;
  double median, p10, p90, mean, stdev, min, max;  // NaN each when count == 0
};
SampleStats summarize(std::span<const double> v);

}  // namespace xstage::testing
