#include "xstage/testing/stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "xstage/model/stats.hpp"

namespace xstage::testing {

namespace {
constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
}

double median(std::span<const double> v) { return v.empty() ? kNone : stats::median(v); }

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
  return {v.size(), median(v), percentile(v, 0.1), percentile(v, 0.9), mean(v), stdev(v), min(v), max(v)};
}

}  // namespace xstage::testing
