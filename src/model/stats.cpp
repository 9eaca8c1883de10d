#include "xstage/model/stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
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

namespace {
constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
}

double median_or_nan(std::span<const double> v) { return v.empty() ? kNone : median(v); }

double percentile(std::span<const double> v, double q) {
  if (v.empty()) return kNone;
  std::vector<double> s(v.begin(), v.end());
  std::sort(s.begin(), s.end());
  const double r = std::clamp(q, 0.0, 1.0) * double(s.size() - 1) + 0.5;
  return s[std::min(s.size() - 1, std::size_t(r))];
}

double mean(std::span<const double> v) {
  if (v.empty()) return kNone;
  double sum = 0;
  for (double x : v) sum += x;
  return sum / double(v.size());
}

double stdev(std::span<const double> v) {
  if (v.empty()) return kNone;
  if (v.size() == 1) return 0.0;
  const double m = mean(v);
  double ss = 0;
  for (double x : v) ss += (x - m) * (x - m);
  return std::sqrt(ss / double(v.size() - 1));
}

double min(std::span<const double> v) { return v.empty() ? kNone : *std::min_element(v.begin(), v.end()); }
double max(std::span<const double> v) { return v.empty() ? kNone : *std::max_element(v.begin(), v.end()); }

SampleStats summarize(std::span<const double> v) {
  return {v.size(), median_or_nan(v), percentile(v, 0.1), percentile(v, 0.9), mean(v), stdev(v), min(v), max(v)};
}

}  // namespace xstage::stats
