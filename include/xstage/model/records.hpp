// Raw calibration records: the one file format between the probe kernels and the fit.
// CSV with the header line exactly:
//   mode,target,producers,bytes_per_producer,gap_us,t_iss_us,t_period_us
// mode ∈ {periodic, isolated}; target ∈ {remote, local}; t_period_us is empty (or "nan") for isolated
// records. Local-target records are controls and never enter the fit of R.
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace xstage::model {

inline constexpr std::string_view kRecordsHeader =
    "mode,target,producers,bytes_per_producer,gap_us,t_iss_us,t_period_us";

enum class BurstMode { kPeriodic, kIsolated };
enum class StoreTarget { kRemote, kLocal };
const char* to_string(BurstMode m);
const char* to_string(StoreTarget t);

struct CalibrationRecord {
  BurstMode mode;
  StoreTarget target;
  int producers;
  double bytes_per_producer;
  double gap_s;
  double t_iss_s;
  double t_period_s;  // NaN for isolated records

  double volume_bytes() const { return static_cast<double>(producers) * bytes_per_producer; }
};

// Most records one file may hold: fit and fidelity work on every record (fidelity simulates each), so a larger
// file is refused at its first record past the limit. A calibration sweep has a few hundred (160 in
// results/h200-x2/calibration/records.csv).
inline constexpr std::size_t kMaxRecords = 10'000;

// Throws xstage::InputError naming the line, the column and the value (and the line past kMaxRecords).
std::vector<CalibrationRecord> parse_records_csv(std::istream& in, std::string_view origin);
std::vector<CalibrationRecord> load_records_csv(const std::string& path);
void write_records_csv(std::ostream& out, const std::vector<CalibrationRecord>& records);

// The probe's measured loop gap of each zero-gap periodic point (raw.json `gap_us`), keyed by
// (target, K, B); records.csv writes those gaps as 0. The fit and the fidelity report read the same.
struct ZeroGapLoop {
  StoreTarget target;
  int producers;
  double bytes_per_producer;
  double gap_s;
};
// Reads the zero-gap periodic points of an `xstage.calibration_raw/1` file; throws InputError.
std::vector<ZeroGapLoop> load_zero_gap_loops(const std::string& raw_json_path);
// The same from the file's text; `origin` names it in errors (the fuzz harnesses call this).
std::vector<ZeroGapLoop> parse_zero_gap_loops(std::string_view text, const std::string& origin);

}  // namespace xstage::model
