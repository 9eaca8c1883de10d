// What every file loader shares: reading an input file, parsing JSON with errors that name the file,
// the line and column and the field, and checking a field against its accepted range. Every error is
// an InputError of one bounded line: "<file>: <field>: <what>, got <value shown by bounded_json>".
#pragma once

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "xstage/model/bounded_text.hpp"
#include "xstage/model/error.hpp"

namespace xstage {

// Larger files are refused before they are read (the largest real inputs, routing traces, are tens of MB).
inline constexpr std::uintmax_t kMaxInputFileBytes = std::uintmax_t{1} << 30;
// JSON nested deeper is refused before it is parsed: no input format nests more than a few levels, and
// a bound here keeps every later recursive walk (copy, compare, dump) safe.
inline constexpr int kMaxJsonDepth = 64;

// "<origin>: <field>: <what>", origin and field bounded and escaped.
[[noreturn]] inline void input_fail(std::string_view origin, std::string_view field, const std::string& what) {
  throw InputError(bounded_text(origin, 240) + ": " + bounded_text(field, 120) + ": " + what);
}

// An accepted interval of a physical quantity; open ends exclude the bound.
struct Range {
  double lo, hi;
  bool lo_open, hi_open;
  std::string_view unit;

  // Finite, within the bounds, and zero or a normal double: a subnormal value (4e-320) has lost its precision
  // and divides to inf.
  bool contains(double x) const {
    return std::isfinite(x) && (x == 0.0 || std::isnormal(x)) && (lo_open ? x > lo : x >= lo) &&
           (hi_open ? x < hi : x <= hi);
  }
  // "must be > 0 and < 1e+06 us" for a value !contains(x), and why a subnormal one is refused.
  std::string refusal(double x) const {
    return "must be " + describe() +
           (std::fpclassify(x) == FP_SUBNORMAL ? std::string(" and not subnormal (it computes as 0 or inf)") : "");
  }
  // "> 0 and < 1e+06 us", ">= 0.001 and <= 1e+06 GB/s".
  std::string describe() const {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s %g and %s %g%s%.*s", lo_open ? ">" : ">=", lo, hi_open ? "<" : "<=", hi,
                  unit.empty() ? "" : " ", static_cast<int>(unit.size()), unit.data());
    return buf;
  }
};

struct IntRange {
  long long lo, hi;
  std::string describe() const { return std::to_string(lo) + ".." + std::to_string(hi); }
};

// The accepted ranges of the quantities in input files (platform, records, schedules): one place, so
// every loader accepts the same values.
namespace ranges {
inline constexpr Range kRateGbps{1e-3, 1e6, false, false, "GB/s"};
inline constexpr Range kTimeUs{0.0, 1e6, true, true, "us"};  // a duration > 0 and < 1 s
inline constexpr Range kSpanUs{0.0, 1e6, false, true, "us"};  // a gap or compute span >= 0 and < 1 s
inline constexpr Range kBytes{1.0, 1e12, false, false, "bytes"};
inline constexpr IntRange kProducers{1, 1'000'000};
inline constexpr Range kTimeMs{0.0, 1e6, true, true, "ms"};     // a measured duration in ms, > 0 and < 1000 s
inline constexpr IntRange kTileEdge{1, 4096};                   // a tile edge or head dimension (elements)
inline constexpr IntRange kSeqLen{1, 1 << 26};                  // a sequence length (tokens)
inline constexpr IntRange kHeads{1, 1 << 16};                   // attention heads per GPU
inline constexpr IntRange kBursts{1, 1 << 20};                  // output bursts of one kernel
inline constexpr IntRange kGemmDim{1, 1 << 20};                 // a GEMM dimension (hidden, intermediate)
inline constexpr IntRange kElementBytes{1, 8};                  // bytes of one output element (2: bf16)
inline constexpr IntRange kExperts{1, 65536};                   // routed experts of a MoE layer
inline constexpr IntRange kRanks{1, 1024};                      // expert-parallel ranks
inline constexpr IntRange kFusedGrid{2, 1 << 16};               // CTAs of the fused MoE kernel's grid
}  // namespace ranges

// A JSON number within `r`.
inline double json_number_in(const nlohmann::json& v, std::string_view origin, std::string_view field, const Range& r) {
  if (!v.is_number()) input_fail(origin, field, "must be a number " + r.describe() + ", got " + bounded_json(v));
  const double x = v.get<double>();
  if (!r.contains(x)) input_fail(origin, field, r.refusal(x) + ", got " + bounded_json(v));
  return x;
}

// A JSON integer within `r`; a number with a fraction (1.5) is refused, an integral one (2.0, 1e3) taken.
inline long long json_integer_in(const nlohmann::json& v, std::string_view origin, std::string_view field,
                                 const IntRange& r) {
  const auto bad = [&] { input_fail(origin, field, "must be an integer in " + r.describe() + ", got " + bounded_json(v)); };
  if (v.is_number_unsigned()) {
    const auto x = v.get<std::uint64_t>();
    if (r.hi < 0 || x > static_cast<std::uint64_t>(r.hi) || static_cast<long long>(x) < r.lo) bad();
    return static_cast<long long>(x);
  }
  if (v.is_number_integer()) {
    const auto x = v.get<std::int64_t>();
    if (x < r.lo || x > r.hi) bad();
    return x;
  }
  if (v.is_number_float()) {
    const double x = v.get<double>();
    if (!std::isfinite(x) || x != std::floor(x) || x < static_cast<double>(r.lo) || x > static_cast<double>(r.hi)) bad();
    return static_cast<long long>(x);
  }
  bad();
  return 0;
}

// A JSON object member that must be present: "<origin>: <where>.<key>: missing" otherwise (and "must
// be an object" when `obj` is not one). `where` is the object's own field path ("" at the top level).
inline std::string json_field_path(std::string_view where, std::string_view key) {
  return where.empty() ? std::string(key) : std::string(where) + "." + std::string(key);
}
inline const nlohmann::json& json_member(const nlohmann::json& obj, std::string_view origin, std::string_view where,
                                         std::string_view key) {
  if (!obj.is_object())
    input_fail(origin, where.empty() ? "(top level)" : where, "must be a JSON object, got " + bounded_json(obj));
  const auto it = obj.find(key);
  if (it == obj.end()) input_fail(origin, json_field_path(where, key), "missing");
  return *it;
}
// The member or nullptr when absent (`obj` must still be an object).
inline const nlohmann::json* json_optional_member(const nlohmann::json& obj, std::string_view origin,
                                                  std::string_view where, std::string_view key) {
  if (!obj.is_object())
    input_fail(origin, where.empty() ? "(top level)" : where, "must be a JSON object, got " + bounded_json(obj));
  const auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}
// A JSON string of at most `max_bytes` bytes.
inline const std::string& json_string_in(const nlohmann::json& v, std::string_view origin, std::string_view field,
                                         std::size_t max_bytes = 200) {
  if (!v.is_string()) input_fail(origin, field, "must be a string, got " + bounded_json(v));
  const auto& s = v.get_ref<const std::string&>();
  if (s.size() > max_bytes)
    input_fail(origin, field, "must be at most " + std::to_string(max_bytes) + " bytes, got " + bounded_json(v));
  return s;
}
// A JSON array of at most `max_elements` elements (at least `min_elements`).
inline const nlohmann::json& json_array_in(const nlohmann::json& v, std::string_view origin, std::string_view field,
                                           std::size_t max_elements, std::size_t min_elements = 0) {
  if (!v.is_array()) input_fail(origin, field, "must be an array, got " + bounded_json(v));
  if (v.size() > max_elements || v.size() < min_elements)
    input_fail(origin, field,
               "must have " + std::to_string(min_elements) + ".." + std::to_string(max_elements) + " elements, got " +
                   std::to_string(v.size()));
  return v;
}

// The whole of a regular file, or an InputError naming it (missing, a directory, a device, too large).
inline std::string read_input_file(const std::string& path, std::string_view kind) {
  namespace fs = std::filesystem;
  const std::string shown = bounded_text(path, 240);
  const std::string what = std::string(kind) + " file";
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) throw InputError(shown + ": cannot open " + what + " (no such file)");
  if (fs::is_directory(st)) throw InputError(shown + ": is a directory, not a " + what);
  if (!fs::is_regular_file(st)) throw InputError(shown + ": is not a regular file (a " + what + " must be one)");
  // Opened without blocking and checked again on the descriptor: a path swapped for a FIFO or a device
  // after the check above is refused instead of blocking the read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw InputError(shown + ": cannot open " + what + " (" + std::strerror(errno) + ")");
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat fst {};
  if (::fstat(fd, &fst) != 0 || !S_ISREG(fst.st_mode))
    throw InputError(shown + ": is not a regular file (a " + what + " must be one)");
  const auto size = static_cast<std::uintmax_t>(fst.st_size);
  if (size > kMaxInputFileBytes)
    throw InputError(shown + ": " + std::to_string(size) + " bytes; a " + what + " is at most " +
                     std::to_string(kMaxInputFileBytes) + " bytes");
  std::string text(static_cast<std::size_t>(size), '\0');
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw InputError(shown + ": cannot read " + what + " (" + std::strerror(errno) + ")");
    if (n == 0) break;  // the file shrank while read
    done += static_cast<std::size_t>(n);
  }
  text.resize(done);
  return text;
}

namespace detail {

// A structural walk over JSON text (strings skipped, containers and keys tracked) that finds what
// the DOM parser would accept but the loaders must not: nesting deeper than kMaxJsonDepth and numbers
// beyond a double. It also names the field at a byte offset, for parse errors.
class JsonScan {
 public:
  explicit JsonScan(std::string_view text) : text_(text) {}

  // Walks up to byte `stop`; false with error() set at the first problem before it.
  bool walk(std::size_t stop) {
    const std::size_t n = std::min(stop, text_.size());
    while (pos_ < n) {
      const char c = text_[pos_];
      if (c == '"') {
        std::size_t j = pos_ + 1;
        while (j < text_.size() && text_[j] != '"') j += text_[j] == '\\' ? 2 : 1;
        if (!levels_.empty() && levels_.back().object && levels_.back().key_next)
          levels_.back().key = std::string(text_.substr(pos_ + 1, std::min<std::size_t>(j - pos_ - 1, 200)));
        pos_ = j + 1;
        continue;
      }
      if (c == '{' || c == '[') {
        if (static_cast<int>(levels_.size()) >= kMaxJsonDepth)
          return fail("nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
        levels_.push_back({c == '{', "", 0, c == '{'});
      } else if ((c == '}' || c == ']') && !levels_.empty()) {
        levels_.pop_back();
      } else if (c == ':' && !levels_.empty()) {
        levels_.back().key_next = false;
      } else if (c == ',' && !levels_.empty()) {
        if (levels_.back().object) levels_.back().key_next = true;
        else ++levels_.back().index;
      } else if (c == '-' || (c >= '0' && c <= '9')) {
        std::size_t j = pos_;
        while (j < text_.size() && std::string_view("0123456789+-.eE").find(text_[j]) != std::string_view::npos) ++j;
        const std::string token(text_.substr(pos_, j - pos_));
        errno = 0;
        const double x = std::strtod(token.c_str(), nullptr);
        if (errno == ERANGE && std::isinf(x))
          return fail("number " + bounded_text(token, 40) + " is beyond the range of a double (about 1.8e308)");
        pos_ = j;
        continue;
      }
      ++pos_;
    }
    return true;
  }

  // The field at the walk's position, e.g. issue_floor[1].t_iss0_us, or "(top level)"; its first 8
  // levels, for a deep one.
  std::string field() const {
    std::string f;
    for (std::size_t i = 0; i < levels_.size(); ++i) {
      const Level& l = levels_[i];
      if (i == 8 || f.size() > 160) return f + "...";
      if (!l.object) {
        f += '[';
        f += std::to_string(l.index);
        f += ']';
      } else if (!l.key.empty()) {
        if (!f.empty()) f += '.';
        f += l.key;
      }
    }
    return f.empty() ? "(top level)" : f;
  }
  const std::string& error() const { return error_; }
  std::size_t position() const { return pos_; }

 private:
  struct Level {
    bool object;
    std::string key;
    std::size_t index;
    bool key_next;
  };
  bool fail(std::string what) {
    error_ = std::move(what);
    return false;
  }
  std::string_view text_;
  std::size_t pos_ = 0;
  std::vector<Level> levels_;
  std::string error_;
};

// "<origin>:<line>:<column> (byte <offset>): <field>: <what>" (line and column 1-based).
[[noreturn]] inline void json_text_fail(std::string_view text, std::string_view origin, std::size_t offset,
                                        std::string_view field, const std::string& what) {
  offset = std::min(offset, text.size());
  std::size_t line = 1, line_start = 0;
  for (std::size_t i = 0; i < offset; ++i)
    if (text[i] == '\n') ++line, line_start = i + 1;
  input_fail(std::string(origin) + ":" + std::to_string(line) + ":" + std::to_string(offset - line_start + 1) +
                 " (byte " + std::to_string(offset) + ")",
             field, what);
}

}  // namespace detail

// Parses JSON text read from `origin`; every problem is an InputError naming origin, the position and
// the field there. Empty text, nesting deeper than kMaxJsonDepth, numbers beyond a double, syntax
// errors and invalid UTF-8 are all refused.
inline nlohmann::json parse_json_input(std::string_view text, std::string_view origin) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    throw InputError(bounded_text(origin, 240) + ": empty file (expected a JSON object)");
  detail::JsonScan scan(text);
  if (!scan.walk(text.size())) detail::json_text_fail(text, origin, scan.position(), scan.field(), scan.error());
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // nlohmann's message: "[json.exception.parse_error.101] parse error at line 1, column 5: <reason>;
    // last read: '<token>'"; the position is recomputed here and the token bounded.
    std::string_view msg = e.what();
    if (const auto p = msg.find("] "); p != std::string_view::npos) msg.remove_prefix(p + 2);
    if (msg.rfind("parse error", 0) == 0)
      if (const auto p = msg.find(": "); p != std::string_view::npos) msg.remove_prefix(p + 2);
    std::string what = "not valid JSON: ";
    if (const auto p = msg.find("; last read: '"); p != std::string_view::npos) {
      std::string_view token = msg.substr(p + 14);
      if (!token.empty() && token.back() == '\'') token.remove_suffix(1);
      what += bounded_text(msg.substr(0, p), 120) + " near '" + bounded_text(token, 40) + "'";
    } else {
      what += bounded_text(msg, 120);
    }
    std::size_t offset = text.size();
    if (const auto* pe = dynamic_cast<const nlohmann::json::parse_error*>(&e); pe && pe->byte > 0) offset = pe->byte - 1;
    detail::JsonScan at(text);
    at.walk(offset);
    detail::json_text_fail(text, origin, offset, at.field(), what);
  }
}

inline nlohmann::json load_json_input(const std::string& path, std::string_view kind) {
  return parse_json_input(read_input_file(path, kind), path);
}

}  // namespace xstage
