// Small robust statistics used by the fit, the simulator reports and the benchmark summaries.
#pragma once

#include <span>
#include <vector>

namespace xstage::stats {

double median(std::span<const double> xs);               // throws std::invalid_argument when empty
double median_abs_deviation(std::span<const double> xs);  // MAD about the median (unscaled)
double geometric_mean(std::span<const double> xs);       // all > 0
double max_abs(std::span<const double> xs);

}  // namespace xstage::stats
