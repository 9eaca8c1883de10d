// A work limit on user numbers, checked before anything is allocated (the CLI, the planner).
#pragma once

#include <cstdio>
#include <string>

#include "xstage/model/error.hpp"

namespace xstage {

// Refuses a request whose work (`units` of `unit`, about `bytes_per_unit` bytes each) exceeds `limit`
// units: "simulate: --producers 100000 x --bursts 100000 = 1e+10 producer-bursts (about 894 GiB) exceeds
// the limit of 16777216 producer-bursts (about 1.5 GiB)".
inline void require_work_within(const std::string& request, double units, double limit, const std::string& unit,
                         double bytes_per_unit) {
  if (units <= limit) return;
  auto size = [](double bytes) {
    const char* names[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int i = 0;
    while (bytes >= 1024 && i < 6) {
      bytes /= 1024;
      ++i;
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3g %s", bytes, names[i]);
    return std::string(buf);
  };
  char count[64], lim[64];
  std::snprintf(count, sizeof count, "%.4g", units);
  std::snprintf(lim, sizeof lim, "%.0f", limit);
  throw InputError(request + " = " + count + " " + unit + " (about " + size(units * bytes_per_unit) +
                   ") exceeds the limit of " + lim + " " + unit + " (about " + size(limit * bytes_per_unit) + ")");
}

}  // namespace xstage
