#include "xstage/model/stats.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace xstage::stats {

double median(std::span<const double> xs) {
  if (xs.empty()) throw std::invalid_argument("median of an empty set");
  std::vector<double> v(xs.begin(), xs.end());
  const std::size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double upper = v[mid];
  if (v.size() % 2 == 1) return upper;
  const double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return 0.5 * (lower + upper);
}

double median_abs_deviation(std::span<const double> xs) {
  const double m = median(xs);
  std::vector<double> dev;
  dev.reserve(xs.size());
  for (double x : xs) dev.push_back(std::fabs(x - m));
  return median(dev);
}

double geometric_mean(std::span<const double> xs) {
  if (xs.empty()) throw std::invalid_argument("geometric mean of an empty set");
  double log_sum = 0.0;
  for (double x : xs) {
    if (!(x > 0.0)) throw std::invalid_argument("geometric mean needs positive values");
    log_sum += std::log(x);
  }
  return std::exp(log_sum / static_cast<double>(xs.size()));
}

double max_abs(std::span<const double> xs) {
  double m = 0.0;
  for (double x : xs) m = std::max(m, std::fabs(x));
  return m;
}

}  // namespace xstage::stats
