#include "xstage/model/records.hpp"

#include <charconv>
#include <cmath>
#include <fstream>
#include <istream>
#include <ostream>
#include <sstream>

#include "xstage/model/error.hpp"
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
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

struct LineContext {
  std::string_view origin;
  std::size_t line;
  [[noreturn]] void fail(std::string_view column, const std::string& value, std::string_view what) const {
    throw InputError(std::string(origin) + ":" + std::to_string(line) + ": column " + std::string(column) + ": " +
                     std::string(what) + ", got \"" + value + "\"");
  }
};

double parse_double(const std::string& s, const LineContext& ctx, std::string_view column) {
  if (s.empty()) ctx.fail(column, s, "missing value");
  double v = 0.0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) ctx.fail(column, s, "not a number");
  if (!std::isfinite(v)) ctx.fail(column, s, "must be finite");
  return v;
}

}  // namespace

std::vector<CalibrationRecord> parse_records_csv(std::istream& in, std::string_view origin) {
  std::string line;
  std::size_t line_no = 0;
  bool found_header = false;
  // Header (skipping blank lines and '#' comments before it).
  while (std::getline(in, line)) {
    ++line_no;
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    std::string header;
    for (const auto& c : split_csv_line(t)) header += (header.empty() ? "" : ",") + trim(c);
    if (header != kRecordsHeader)
      throw InputError(std::string(origin) + ":" + std::to_string(line_no) + ": header must be \"" +
                       std::string(kRecordsHeader) + "\", got \"" + t + "\"");
    found_header = true;
    break;
  }
  if (!found_header)
    throw InputError(std::string(origin) + ": empty records file (expected header \"" + std::string(kRecordsHeader) + "\")");

  std::vector<CalibrationRecord> records;
  while (std::getline(in, line)) {
    ++line_no;
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    const LineContext ctx{origin, line_no};
    auto cols = split_csv_line(t);
    for (auto& c : cols) c = trim(c);
    if (cols.size() != 7)
      throw InputError(std::string(origin) + ":" + std::to_string(line_no) + ": expected 7 columns, got " +
                       std::to_string(cols.size()));
    CalibrationRecord r{};
    if (cols[0] == "periodic") r.mode = BurstMode::kPeriodic;
    else if (cols[0] == "isolated") r.mode = BurstMode::kIsolated;
    else ctx.fail("mode", cols[0], "must be periodic or isolated");
    if (cols[1] == "remote") r.target = StoreTarget::kRemote;
    else if (cols[1] == "local") r.target = StoreTarget::kLocal;
    else ctx.fail("target", cols[1], "must be remote or local");
    const double k = parse_double(cols[2], ctx, "producers");
    if (k < 1 || k != std::floor(k) || k > 1e6) ctx.fail("producers", cols[2], "must be a positive integer");
    r.producers = static_cast<int>(k);
    r.bytes_per_producer = parse_double(cols[3], ctx, "bytes_per_producer");
    if (r.bytes_per_producer <= 0) ctx.fail("bytes_per_producer", cols[3], "must be > 0");
    const double gap_us = parse_double(cols[4], ctx, "gap_us");
    if (gap_us < 0) ctx.fail("gap_us", cols[4], "must be >= 0");
    r.gap_s = units::us_to_s(gap_us);
    const double t_iss_us = parse_double(cols[5], ctx, "t_iss_us");
    if (t_iss_us <= 0) ctx.fail("t_iss_us", cols[5], "must be > 0");
    r.t_iss_s = units::us_to_s(t_iss_us);
    if (r.mode == BurstMode::kPeriodic) {
      const double t_period_us = parse_double(cols[6], ctx, "t_period_us");
      if (t_period_us <= 0) ctx.fail("t_period_us", cols[6], "must be > 0 for periodic records");
      r.t_period_s = units::us_to_s(t_period_us);
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
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot open records file");
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

}  // namespace xstage::model
