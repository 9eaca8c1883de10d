// Input files the CLI tests hand to the binary.
#pragma once

#include <filesystem>
#include <fstream>
#include <vector>

#include "xstage/model/burst_gap.hpp"
#include "xstage/model/records.hpp"

namespace xstage::test {

// Calibration records of a model platform with R = 600 GB/s and T_iss0 = 1 us at (64, 32 KiB): three
// zero-gap volumes and a gap sweep, which `xstage fit` accepts.
inline void write_fit_records(const std::filesystem::path& path) {
  using namespace xstage::model;
  std::vector<CalibrationRecord> rs;
  const double r = 600e9, t0 = 1e-6;
  for (double b : {32768.0, 65536.0, 131072.0}) {
    const double v = 64 * b;
    rs.push_back({BurstMode::kPeriodic, StoreTarget::kRemote, 64, b, 0.0, issue_time_s(t0, v, r, 0), period_s(t0, v, r, 0)});
  }
  for (int i = 0; i <= 10; ++i) {
    const double v = 64 * 32768.0, g = 2 * v / r * i / 10;
    rs.push_back({BurstMode::kPeriodic, StoreTarget::kRemote, 64, 32768, g, issue_time_s(t0, v, r, g), period_s(t0, v, r, g)});
  }
  std::ofstream f(path);
  write_records_csv(f, rs);
}

}  // namespace xstage::test
