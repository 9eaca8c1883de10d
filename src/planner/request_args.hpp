// The request reader of the planner's commands (requests.cpp, plan.cpp): a request object's arguments by name,
// each checked with the rule of the CLI flag of the same name, every unknown key refused. Internal to the planner.
#pragma once

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "xstage/model/bounded_text.hpp"
#include "xstage/model/input_file.hpp"
#include "xstage/planner/requests.hpp"

namespace xstage::planner::detail {

inline std::string fmt_g(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

// An argument as messages name it: the CLI's flag (--heads-per-gpu) or the request's key (heads_per_gpu).
inline std::string arg(bool flag_names, std::string key) {
  if (!flag_names) return key;
  std::replace(key.begin(), key.end(), '_', '-');
  return "--" + key;
}

// The value as the caller wrote it, bounded and escaped (xstage/model/bounded_text.hpp): a string's own text,
// anything else its JSON text.
inline std::string shown(const nlohmann::json& v) {
  return v.is_string() ? bounded_text(v.get_ref<const std::string&>()) : bounded_json(v);
}

// The rules of a number argument, in the order the CLI's flags check them.
struct NumberRule {
  bool positive = false;                  // "> 0"
  bool non_negative = false;              // ">= 0"
  std::optional<std::pair<double, double>> range;  // "in [lo, hi]"
  bool integer_bounds = false;  // the range written in full ("[1, 1048576]", the CLI's integer ranges), not %g
  // The range is a CLI::Range of the CLI11 library (fit's --link-gbps, --sms), whose message reads "Value 0 not in
  // range 0.001000 to 1000000.000000" (its bounds as std::to_string writes them, integers with integer_bounds).
  bool cli11_range = false;
};

// Reads the request's arguments by name; every name read is known, any other key is refused by done().
class Args {
 public:
  Args(const nlohmann::json& request, const char* command) : request_(request), command_(command) {
    if (!request_.is_object())
      throw RequestError(std::string(command) + ": the request must be a JSON object, got " + request_.type_name());
  }

  // The value under `key`, or nullptr where absent or null.
  const nlohmann::json* find(const std::string& key) {
    known_.insert(key);
    const auto it = request_.find(key);
    return it == request_.end() || it->is_null() ? nullptr : &*it;
  }

  std::optional<double> number(const std::string& key, const NumberRule& rule) {
    const nlohmann::json* v = find(key);
    if (!v) return std::nullopt;
    const bool is_number = v->is_number();
    const double x = is_number ? v->get<double>() : 0.0;
    if (rule.positive) {
      if (!is_number) throw RequestError(key + ": must be a finite number > 0, got \"" + shown(*v) + "\"");
      if (x <= 0) throw RequestError(key + ": must be > 0, got " + shown(*v));
    }
    if (rule.non_negative) {
      if (!is_number) throw RequestError(key + ": must be a finite number >= 0, got \"" + shown(*v) + "\"");
      if (x < 0) throw RequestError(key + ": must be >= 0, got " + shown(*v));
    }
    if (rule.range && (!is_number || x < rule.range->first || x > rule.range->second)) {
      if (rule.cli11_range) throw RequestError(key + ": Value " + shown(*v) + " not in range " + cli11_range_text(rule));
      throw RequestError(key + ": must be in " + range_text(rule) + ", got " + shown(*v));
    }
    if (!is_number) throw RequestError(key + ": must be a finite decimal number, got \"" + shown(*v) + "\"");
    return x;
  }

  std::optional<int> integer(const std::string& key, const NumberRule& rule) {
    const std::optional<long long> x = long_integer(key, rule);
    if (x && (*x < -2147483648LL || *x > 2147483647LL))
      throw RequestError(key + ": must be in [-2147483648, 2147483647], got " + std::to_string(*x));
    return x ? std::optional<int>(static_cast<int>(*x)) : std::nullopt;
  }

  // A 64-bit integer (the CLI's long long options, e.g. --tokens).
  std::optional<long long> long_integer(const std::string& key, const NumberRule& rule) {
    const nlohmann::json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_number_integer()) throw RequestError(key + ": must be a decimal integer, got \"" + shown(*v) + "\"");
    number(key, rule);  // its rules, as a number
    if (v->is_number_unsigned() && v->get<unsigned long long>() > 9223372036854775807ULL)
      throw RequestError(key + ": must be in [-9223372036854775808, 9223372036854775807], got " + shown(*v));
    return v->get<long long>();
  }

  // A text argument (a name, a choice or a path checked where it is used).
  std::optional<std::string> text(const std::string& key) {
    const nlohmann::json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_string()) throw RequestError(key + ": must be a string, got " + shown(*v));
    return v->get<std::string>();
  }

  // A non-empty list of integers, each under `rule` (the CLI's repeated values, e.g. --seq 8192 16384).
  std::optional<std::vector<long long>> integer_list(const std::string& key, const NumberRule& rule) {
    const nlohmann::json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_array() || v->empty())
      throw RequestError(key + ": must be a non-empty list of integers, got " + shown(*v));
    std::vector<long long> out;
    for (const auto& x : *v) {
      if (!x.is_number_integer()) throw RequestError(key + ": must be decimal integers, got " + shown(x));
      const double d = x.get<double>();
      if (rule.positive && d <= 0) throw RequestError(key + ": must be > 0, got " + shown(x));
      if (rule.range && (d < rule.range->first || d > rule.range->second))  // an integer range, as the CLI prints it
        throw RequestError(key + ": must be in [" + std::to_string(static_cast<long long>(rule.range->first)) + ", " +
                           std::to_string(static_cast<long long>(rule.range->second)) + "], got " + shown(x));
      out.push_back(x.get<long long>());
    }
    return out;
  }

  // A flag: true or false; false where absent.
  bool flag(const std::string& key) {
    const nlohmann::json* v = find(key);
    if (!v) return false;
    if (!v->is_boolean()) throw RequestError(key + ": must be true or false, got " + shown(*v));
    return v->get<bool>();
  }

  // A path that must name an existing file (not a folder); "" where absent.
  std::string existing_file(const std::string& key) {
    const nlohmann::json* v = find(key);
    if (!v) return {};
    if (!v->is_string()) throw RequestError(key + ": must be a path (a string), got " + shown(*v));
    return existing_path(key, v->get<std::string>());
  }

  // A list of paths that must each name an existing file (the CLI's repeated values, e.g. --traces A B); empty where
  // absent.
  std::vector<std::string> existing_files(const std::string& key) {
    const nlohmann::json* v = find(key);
    if (!v) return {};
    if (!v->is_array() || v->empty())
      throw RequestError(key + ": must be a non-empty list of paths (strings), got " + shown(*v));
    std::vector<std::string> out;
    for (const auto& x : *v) {
      if (!x.is_string()) throw RequestError(key + ": must be paths (strings), got " + shown(x));
      out.push_back(existing_path(key, x.get<std::string>()));
    }
    return out;
  }

  template <class T>
  static T required(const std::optional<T>& v, const std::string& key) {
    if (!v) throw RequestError(key + " is required");
    return *v;
  }

  void done() const {
    for (const auto& [key, value] : request_.items())
      if (!known_.count(key)) {
        std::string accepted;
        for (const auto& k : known_) accepted += (accepted.empty() ? "" : ", ") + k;
        throw RequestError(bounded_text(key) + ": no such argument of " + command_ + " (accepted: " + accepted + ")");
      }
  }

 private:
  // `path` where it names an existing file (not a folder), else the CLI's message (CLI::ExistingFile's).
  static std::string existing_path(const std::string& key, const std::string& path) {
    std::error_code ec;
    const auto st = std::filesystem::status(path, ec);
    if (ec || !std::filesystem::exists(st)) throw RequestError(key + ": File does not exist: " + bounded_text(path, 240));
    if (std::filesystem::is_directory(st))
      throw RequestError(key + ": File is actually a directory: " + bounded_text(path, 240));
    return path;
  }

  // "LO to HI" as CLI::Range writes its bounds.
  static std::string cli11_range_text(const NumberRule& rule) {
    const auto bound = [&rule](double x) {
      return rule.integer_bounds ? std::to_string(static_cast<long long>(x)) : std::to_string(x);
    };
    std::string text = bound(rule.range->first);
    text += " to ";
    text += bound(rule.range->second);
    return text;
  }

  // "[lo, hi]" (appended piece by piece: GCC 12 warns, wrongly, of "[" + std::string&&).
  static std::string range_text(const NumberRule& rule) {
    const auto bound = [&rule](double x) {
      return rule.integer_bounds ? std::to_string(static_cast<long long>(x)) : fmt_g(x);
    };
    std::string text = "[";
    text += bound(rule.range->first);
    text += ", ";
    text += bound(rule.range->second);
    text += "]";
    return text;
  }

  const nlohmann::json& request_;
  std::string command_;
  std::set<std::string> known_;
};

inline constexpr double kMaxGapUs = 1e6;  // the CLI's --gap-us bound
inline const NumberRule kProducerRule{true, false, std::pair{double(ranges::kProducers.lo), double(ranges::kProducers.hi)}};
inline const NumberRule kByteRule{true, false, std::pair{ranges::kBytes.lo, ranges::kBytes.hi}};
inline const NumberRule kDurationRule{true, false, std::pair{0.0, 1e6}};


}  // namespace xstage::planner::detail
