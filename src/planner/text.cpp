// Text of the planner's outputs and messages (text.hpp).
#include "xstage/planner/text.hpp"

#include <cstdio>

#include "xstage/model/bounded_text.hpp"
#include "xstage/model/error.hpp"
#include "xstage/model/units.hpp"
#include "xstage/planner/requests.hpp"

namespace xstage::planner {

std::int64_t checked_product(const std::vector<std::pair<std::string, std::int64_t>>& factors, std::int64_t limit) {
  std::int64_t p = 1;
  bool overflow = false;
  std::string names;
  for (const auto& [name, v] : factors) {
    if (!names.empty()) names += " x ";
    names += name;
    names += ' ';
    names += std::to_string(v);
    if (!overflow && __builtin_mul_overflow(p, v, &p)) overflow = true;
  }
  if (overflow) throw InputError(names + " overflows 64-bit integers");
  if (p > limit) throw InputError(names + " = " + std::to_string(p) + " exceeds the limit " + std::to_string(limit));
  return p;
}

std::string platform_label(const std::string& platform_path, const model::Platform& platform) {
  std::string label = "'";
  label += shown_text(platform.name, 80);
  label += "' (";
  label += shown_text(platform_source(platform_path), 240);
  label += ')';
  return label;
}

std::string shown_text(std::string_view s, std::size_t max_chars) { return escape_bidi(bounded_text(s, max_chars)); }

std::string one_line(std::string_view s, std::size_t max_bytes) {
  // bounded_text escapes quotes and backslashes too; text that is already a message keeps them.
  std::string t;
  std::size_t from = 0;
  for (std::size_t i = 0; i <= s.size(); ++i) {
    if (i < s.size() && s[i] != '"' && s[i] != '\\') continue;
    t += bounded_text(s.substr(from, i - from), s.size() + 1);
    if (i < s.size()) t += s[i];
    from = i + 1;
  }
  if (t.size() > max_bytes) {
    std::size_t cut = max_bytes;
    while (cut > 0 && (static_cast<unsigned char>(t[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
    t = t.substr(0, cut) + "... (" + std::to_string(s.size()) + " bytes)";
  }
  return escape_bidi(std::move(t));
}

std::string escape_bidi(std::string t) {
  // Bidirectional overrides and isolates reorder what a terminal shows, C1 controls act on it: shown as their
  // code points (the same set bounded_text escapes).
  return escape_terminal_active(std::move(t));
}

std::string fmt_num(double x, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, x);
  return buf;
}

std::string fmt_us(double seconds, int decimals) { return fmt_num(units::s_to_us(seconds), decimals); }

std::string fmt_mib(double bytes, int decimals) { return fmt_num(units::bytes_to_mib(bytes), decimals); }

}  // namespace xstage::planner
