#include "xstage/model/records.hpp"

#include <charconv>

#include <nlohmann/json.hpp>
#include <cmath>
#include <istream>
#include <ostream>
#include <sstream>

#include "xstage/model/error.hpp"
#include "xstage/model/input_file.hpp"
#include "xstage/model/units.hpp"

namespace xstage::model {

const char* to_string(BurstMode m) { return m == BurstMode::kPeriodic ? "periodic" : "isolated"; }
const char* to_string(StoreTarget t) { return t == StoreTarget::kRemote ? "remote" : "local"; }

namespace {

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> cols;
  std::string cur;
  for (char c : line) {
    if (c == ',') {
      cols.push_back(cur);
      cur.clear();
    } else if (c != '\r') {
      cur.push_back(c);
    }
  }
  cols.push_back(cur);
  return cols;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

struct LineContext {
  std::string_view origin;
  std::size_t line;
  [[noreturn]] void fail(std::string_view column, const std::string& value, std::string_view what) const {
    throw InputError(bounded_text(origin, 240) + ":" + std::to_string(line) + ": column " + std::string(column) + ": " +
                     std::string(what) + ", got \"" + bounded_text(value) + "\"");
  }
};

// A number within `r` (ranges of xstage/model/input_file.hpp, shared with the JSON loaders).
double parse_number(const std::string& s, const LineContext& ctx, std::string_view column, const Range& r) {
  if (s.empty()) ctx.fail(column, s, "missing value");
  double v = 0.0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc::result_out_of_range) ctx.fail(column, s, "beyond the range of a double");
  if (ec != std::errc() || ptr != s.data() + s.size()) ctx.fail(column, s, "not a number");
  if (!r.contains(v)) ctx.fail(column, s, r.refusal(v));
  return v;
}

int parse_integer(const std::string& s, const LineContext& ctx, std::string_view column, const IntRange& r) {
  const double v = parse_number(s, ctx, column, Range{-1e308, 1e308, false, false, ""});
  if (v != std::floor(v) || v < static_cast<double>(r.lo) || v > static_cast<double>(r.hi)) ctx.fail(column, s, "must be an integer in " + r.describe());
  return static_cast<int>(v);
}

}  // namespace

std::vector<CalibrationRecord> parse_records_csv(std::istream& in, std::string_view origin) {
  std::string line;
  std::size_t line_no = 0;
  bool found_header = false;
  // Header (skipping blank lines and '#' comments before it).
  while (std::getline(in, line)) {
    ++line_no;
    // A UTF-8 byte order mark (spreadsheet exports) before the first line is not part of the header.
    if (line_no == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    std::string header;
    for (const auto& c : split_csv_line(t)) {
      if (!header.empty()) header += ',';
      header += trim(c);
    }
    if (header != kRecordsHeader)
      throw InputError(bounded_text(origin, 240) + ":" + std::to_string(line_no) + ": header must be \"" +
                       std::string(kRecordsHeader) + "\", got \"" + bounded_text(t) + "\"");
    found_header = true;
    break;
  }
  if (!found_header)
    throw InputError(bounded_text(origin, 240) + ": empty records file (expected header \"" + std::string(kRecordsHeader) + "\")");

  std::vector<CalibrationRecord> records;
  while (std::getline(in, line)) {
    ++line_no;
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    if (records.size() == kMaxRecords)
      throw InputError(bounded_text(origin, 240) + ":" + std::to_string(line_no) + ": more than " +
                       std::to_string(kMaxRecords) + " records; a records file holds at most " +
                       std::to_string(kMaxRecords) + " (a calibration sweep: a few hundred)");
    const LineContext ctx{origin, line_no};
    auto cols = split_csv_line(t);
    for (auto& c : cols) c = trim(c);
    if (cols.size() != 7)
      throw InputError(bounded_text(origin, 240) + ":" + std::to_string(line_no) + ": expected 7 columns, got " +
                       std::to_string(cols.size()));
    CalibrationRecord r{};
    if (cols[0] == "periodic") r.mode = BurstMode::kPeriodic;
    else if (cols[0] == "isolated") r.mode = BurstMode::kIsolated;
    else ctx.fail("mode", cols[0], "must be periodic or isolated");
    if (cols[1] == "remote") r.target = StoreTarget::kRemote;
    else if (cols[1] == "local") r.target = StoreTarget::kLocal;
    else ctx.fail("target", cols[1], "must be remote or local");
    r.producers = parse_integer(cols[2], ctx, "producers", ranges::kProducers);
    r.bytes_per_producer = parse_number(cols[3], ctx, "bytes_per_producer", ranges::kBytes);
    r.gap_s = units::us_to_s(parse_number(cols[4], ctx, "gap_us", ranges::kSpanUs));
    r.t_iss_s = units::us_to_s(parse_number(cols[5], ctx, "t_iss_us", ranges::kTimeUs));
    if (r.mode == BurstMode::kPeriodic) {
      r.t_period_s = units::us_to_s(parse_number(cols[6], ctx, "t_period_us", ranges::kTimeUs));
    } else {
      if (!cols[6].empty() && cols[6] != "nan" && cols[6] != "NaN")
        ctx.fail("t_period_us", cols[6], "must be empty for isolated records");
      r.t_period_s = std::nan("");
    }
    records.push_back(r);
  }
  return records;
}

std::vector<CalibrationRecord> load_records_csv(const std::string& path) {
  std::istringstream in(read_input_file(path, "records"));
  return parse_records_csv(in, path);
}

void write_records_csv(std::ostream& out, const std::vector<CalibrationRecord>& records) {
  out << kRecordsHeader << '\n';
  char buf[256];
  for (const auto& r : records) {
    const bool iso = r.mode == BurstMode::kIsolated;
    std::snprintf(buf, sizeof buf, "%s,%s,%d,%.17g,%.9g,%.9g,", to_string(r.mode), to_string(r.target), r.producers,
                  r.bytes_per_producer, units::s_to_us(r.gap_s), units::s_to_us(r.t_iss_s));
    out << buf;
    if (!iso) {
      std::snprintf(buf, sizeof buf, "%.9g", units::s_to_us(r.t_period_s));
      out << buf;
    }
    out << '\n';
  }
}

// Largest point list of a raw calibration file (a full calibration has a few hundred).
constexpr std::size_t kMaxRawPoints = 1 << 20;

std::vector<ZeroGapLoop> parse_zero_gap_loops(std::string_view text, const std::string& path) {
  const nlohmann::json j = parse_json_input(text, path);
  const std::string& schema = json_string_in(json_member(j, path, "", "schema"), path, "schema");
  if (schema != "xstage.calibration_raw/1")
    input_fail(path, "schema", "must be \"xstage.calibration_raw/1\", got " + bounded_json(schema));
  const auto& points = json_array_in(json_member(j, path, "", "points"), path, "points", kMaxRawPoints);
  std::vector<ZeroGapLoop> out;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const auto& p = points[i];
    const std::string where = "points[" + std::to_string(i) + "]";
    const auto* mode = json_optional_member(p, path, where, "mode");
    const auto* phase = json_optional_member(p, path, where, "phase");
    if (!mode || !phase || !mode->is_string() || !phase->is_string() || *mode != "periodic" || *phase != "zero-gap")
      continue;  // only the zero-gap loops are read
    const std::string& target = json_string_in(json_member(p, path, where, "target"), path, where + ".target");
    if (target != "local" && target != "remote")
      input_fail(path, where + ".target", "must be \"local\" or \"remote\", got " + bounded_json(target));
    ZeroGapLoop z{};
    z.target = target == "local" ? StoreTarget::kLocal : StoreTarget::kRemote;
    z.producers = static_cast<int>(
        json_integer_in(json_member(p, path, where, "producers"), path, where + ".producers", ranges::kProducers));
    z.bytes_per_producer = json_number_in(json_member(p, path, where, "bytes_per_producer"), path,
                                          where + ".bytes_per_producer", ranges::kBytes);
    z.gap_s = units::us_to_s(
        json_number_in(json_member(p, path, where, "gap_us"), path, where + ".gap_us", ranges::kSpanUs));
    out.push_back(z);
  }
  return out;
}

std::vector<ZeroGapLoop> load_zero_gap_loops(const std::string& path) {
  return parse_zero_gap_loops(read_input_file(path, "raw calibration"), path);
}

}  // namespace xstage::model
