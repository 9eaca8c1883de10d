// Text of the planner's outputs and messages, shared with the CLI: numbers in fixed decimals, user data as one
// bounded line, the platform as human output names it, and checked products of user numbers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "xstage/model/platform.hpp"

namespace xstage::planner {

std::string fmt_num(double x, int decimals = 2);
std::string fmt_us(double seconds, int decimals = 2);  // seconds shown in µs
std::string fmt_mib(double bytes, int decimals = 2);   // bytes shown in MiB

// User data (names, paths, file contents) as shown on a terminal: bounded_text (one line, control bytes
// and invalid UTF-8 escaped, cut with its size) with bidirectional overrides also escaped.
std::string shown_text(std::string_view s, std::size_t max_chars = 80);
// Only the C1 controls and bidirectional marks escaped (for text already bounded, InputError messages):
// escape_terminal_active of xstage/model/bounded_text.hpp.
std::string escape_bidi(std::string text);
// A message echoing user text, as one line of at most about `max_bytes`: control bytes, invalid UTF-8
// and bidirectional overrides escaped, quotes kept.
std::string one_line(std::string_view s, std::size_t max_bytes = 400);

// "'h200-x2' (embedded)" or "'mine' (/abs/mine.json)": how human output names the platform.
std::string platform_label(const std::string& platform_path, const model::Platform& platform);

// Product of named user numbers in 64-bit integers; throws InputError naming them on overflow or when
// the product exceeds `limit`.
std::int64_t checked_product(const std::vector<std::pair<std::string, std::int64_t>>& factors,
                             std::int64_t limit = INT64_MAX);

}  // namespace xstage::planner
