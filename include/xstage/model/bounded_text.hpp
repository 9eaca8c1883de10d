// The one way input errors show an offending value: bounded in length and nesting, one line, no raw
// control or invalid UTF-8 bytes, and no recursion (a value may be nested 1e6 deep or be a 50 MB
// string; the error message stays short and printing it cannot exhaust the stack).
//
//   bounded_text("a\nb")                 → a\nb               (escaped, still one line)
//   bounded_text(50 MB of 'x')           → xxxx...x... (52428800 bytes)
//   bounded_json([[[[...60000 deep...]]]]) → [[[[...]]]]... (array nested 60000 deep)
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace xstage {

// Characters of a value shown in a message (before the size note); nesting levels shown of a JSON value.
inline constexpr std::size_t kShownChars = 80;
inline constexpr int kShownDepth = 3;

namespace detail {

// Length of the valid UTF-8 sequence starting at s[i] (1..4), or 0 when the bytes there are not one.
inline std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  std::size_t n = 0;
  unsigned min_cp = 0;
  unsigned cp = 0;
  if (c >= 0xC2 && c <= 0xDF) n = 2, cp = c & 0x1Fu, min_cp = 0x80;
  else if (c >= 0xE0 && c <= 0xEF) n = 3, cp = c & 0x0Fu, min_cp = 0x800;
  else if (c >= 0xF0 && c <= 0xF4) n = 4, cp = c & 0x07u, min_cp = 0x10000;
  else return 0;
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0u) != 0x80u) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3Fu);
  }
  if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

// Code points a terminal acts on although they are valid UTF-8: the C1 controls (U+0080..U+009F; U+009B is
// a one-byte CSI) and the marks that reorder or redirect text (bidirectional overrides, isolates and marks).
inline bool is_terminal_active_code_point(unsigned cp) {
  return (cp >= 0x80 && cp <= 0x9F) || (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069) ||
         cp == 0x200E || cp == 0x200F || cp == 0x061C;
}

// The code point of the valid UTF-8 sequence of `n` bytes at s[i].
inline unsigned utf8_code_point(std::string_view s, std::size_t i, std::size_t n) {
  static constexpr unsigned kLead[] = {0, 0x7Fu, 0x1Fu, 0x0Fu, 0x07u};
  unsigned cp = static_cast<unsigned char>(s[i]) & kLead[n];
  for (std::size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3Fu);
  return cp;
}

// `text` with every terminal-active code point (is_terminal_active_code_point) written as \uXXXX; the rest,
// escaped or not, unchanged. For text already bounded (messages built from bounded parts).
inline std::string escape_terminal_active(std::string text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const std::size_t n = c >= 0x80 ? utf8_sequence_length(text, i) : 0;
    if (n > 0 && is_terminal_active_code_point(utf8_code_point(text, i, n))) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04X", utf8_code_point(text, i, n));
      out += esc;
    } else {
      out.append(text, i, n > 0 ? n : 1);
    }
    i += n > 0 ? n : 1;
  }
  return out;
}

// Appends whole units (an escape or a character) while they fit in the budget; never splits one.
class BoundedOut {
 public:
  explicit BoundedOut(std::size_t max_chars) : max_(max_chars) {}
  bool full() const { return full_; }
  // False (and full from then on) once `unit` does not fit.
  bool put(std::string_view unit) {
    if (full_ || out_.size() + unit.size() > max_) return !(full_ = true);
    out_.append(unit);
    return true;
  }
  // The bytes of `s`, escaped: \n \r \t \" \\ by name, other control bytes, DEL and bytes that are
  // not valid UTF-8 as \xNN, C1 controls and bidirectional marks as \uXXXX; other valid UTF-8 characters
  // as they are.
  bool put_escaped(std::string_view s) {
    for (std::size_t i = 0; i < s.size();) {
      const unsigned char c = static_cast<unsigned char>(s[i]);
      char esc[8];
      std::string_view unit;
      std::size_t step = 1;
      if (c == '\n') unit = "\\n";
      else if (c == '\r') unit = "\\r";
      else if (c == '\t') unit = "\\t";
      else if (c == '"') unit = "\\\"";
      else if (c == '\\') unit = "\\\\";
      else if (c >= 0x20 && c < 0x7F) unit = s.substr(i, 1);
      else if (const std::size_t n = c >= 0x80 ? utf8_sequence_length(s, i) : 0; n > 0) {
        step = n;
        if (const unsigned cp = utf8_code_point(s, i, n); is_terminal_active_code_point(cp))
          unit = std::string_view(esc, static_cast<std::size_t>(std::snprintf(esc, sizeof esc, "\\u%04X", cp)));
        else
          unit = s.substr(i, n);
      }
      else unit = std::string_view(esc, static_cast<std::size_t>(std::snprintf(esc, sizeof esc, "\\x%02X", c)));
      if (!put(unit)) return false;
      i += step;
    }
    return true;
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
  std::size_t max_;
  bool full_ = false;
};

// Elements (or members) and nesting depth of a JSON value, walked with an explicit stack.
inline int json_depth(const nlohmann::json& v) {
  int deepest = 0;
  std::vector<std::pair<const nlohmann::json*, int>> todo{{&v, 1}};
  while (!todo.empty()) {
    const auto [node, depth] = todo.back();
    todo.pop_back();
    if (!node->is_structured()) continue;
    deepest = std::max(deepest, depth);
    for (const auto& child : *node)
      if (child.is_structured()) todo.emplace_back(&child, depth + 1);
  }
  return deepest;
}

}  // namespace detail

using detail::escape_terminal_active;

// Text (a CSV field, a file name, a key) escaped to one line and cut after about max_chars
// characters; a cut text ends with "... (N bytes)".
inline std::string bounded_text(std::string_view s, std::size_t max_chars = kShownChars) {
  detail::BoundedOut out(max_chars);
  if (out.put_escaped(s)) return out.take();
  return out.take() + "... (" + std::to_string(s.size()) + " bytes)";
}

// A JSON value as compact JSON text, strings escaped as by bounded_text, containers deeper than
// max_depth levels shown as [...] or {...}, cut after about max_chars characters. A cut rendering
// ends with a note of what was left out: "... (string of N bytes)", "... (array of N elements,
// nested D deep)". Iterative: safe for any nesting depth.
inline std::string bounded_json(const nlohmann::json& v, std::size_t max_chars = kShownChars, int max_depth = kShownDepth) {
  using nlohmann::json;
  detail::BoundedOut out(max_chars);
  bool depth_cut = false;
  struct Frame {
    const json* node;
    json::const_iterator next;
  };
  std::vector<Frame> open;
  // Writes a scalar or opens a container; false once the budget is spent.
  const auto start = [&](const json& x, const std::string* key) {
    if (key) {
      if (!out.put("\"") || !out.put_escaped(*key) || !out.put("\":")) return false;
    }
    if (x.is_string()) return out.put("\"") && out.put_escaped(x.get_ref<const std::string&>()) && out.put("\"");
    if (x.is_number_float() && !std::isfinite(x.get<double>()))  // dump() would print null
      return out.put(std::isnan(x.get<double>()) ? "nan" : x.get<double>() > 0 ? "inf" : "-inf");
    if (!x.is_structured()) return out.put(x.dump());  // numbers, booleans, null: short, no recursion
    const bool is_array = x.is_array();
    if (x.empty()) return out.put(is_array ? "[]" : "{}");
    if (static_cast<int>(open.size()) >= max_depth) {
      depth_cut = true;
      return out.put(is_array ? "[...]" : "{...}");
    }
    open.push_back({&x, x.cbegin()});
    return out.put(is_array ? "[" : "{");
  };
  bool ok = start(v, nullptr);
  while (ok && !open.empty()) {
    Frame& f = open.back();
    if (f.next == f.node->cend()) {
      ok = out.put(f.node->is_array() ? "]" : "}");
      open.pop_back();
      continue;
    }
    if (f.next != f.node->cbegin() && !out.put(",")) break;
    const json::const_iterator it = f.next++;
    if (f.node->is_object()) {
      const std::string key = it.key();
      ok = start(*it, &key);
    } else {
      ok = start(*it, nullptr);
    }
  }
  std::string shown = out.take();
  if (!out.full() && !depth_cut) return shown;
  std::string note;
  if (v.is_string()) {
    note = "string of " + std::to_string(v.get_ref<const std::string&>().size()) + " bytes";
  } else if (v.is_structured()) {
    note = std::string(v.is_array() ? "array of " : "object of ") + std::to_string(v.size()) +
           (v.is_array() ? " element" : " member") + (v.size() == 1 ? "" : "s");
    if (const int d = detail::json_depth(v); d > max_depth) note += ", nested " + std::to_string(d) + " deep";
  }
  return shown + (out.full() ? "..." : "") + (note.empty() ? "" : " (" + note + ")");
}

}  // namespace xstage
