// Statistics: the one set the fit, the simulator's reports, the probe and every bench (and its JSON) use.
//
// Two kinds. Robust statistics of a model's inputs (median, median_abs_deviation, geometric_mean): an empty set
// is an error there (std::invalid_argument). Statistics of measured samples (times, rates, per-tile spans:
// median_or_nan, percentile, mean, stdev, min, max, summarize): an empty set has no median, percentile, mean,
// spread or extreme, so every one of them is NaN (JSON writes it as null), never 0, which would read as a
// measured zero. The median averages the two middle values of an even count; a percentile is the nearest-rank
// sample sorted[round(q·(n-1))]; the standard deviation is the sample one (n-1 in the denominator; 0 for one
// sample).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace xstage::stats {

double median(std::span<const double> xs);               // throws std::invalid_argument when empty
double median_abs_deviation(std::span<const double> xs);  // MAD about the median (unscaled)
double geometric_mean(std::span<const double> xs);       // all > 0
double max_abs(std::span<const double> xs);

// Samples: NaN for an empty set.
double median_or_nan(std::span<const double> v);
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

}  // namespace xstage::stats
