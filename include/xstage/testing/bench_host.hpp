// What the bench drivers of the testing library (moe_bench.hpp, attn_bench.hpp, ...) share: the
// services of the program that runs them, the seed rule and a printf onto a stream.
#pragma once

#include <cstdarg>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace xstage::testing {

// Supplied by the caller (the CLI passes its own helpers), so the messages, the checks and their order
// are the caller's: a driver calls them where its own checks would stand, before any device work.
struct BenchHost {
  std::ostream* out = nullptr;  // progress lines, printed as they happen
  // Device list text ("0,1") -> ordinals; throws xstage::InputError naming `option`.
  std::function<std::vector<int>(const std::string& option, const std::string& text)> parse_gpus;
  // Refuses an output path that may not be written (exists without force, is one of `inputs`, ...).
  std::function<void(const std::string& option, const std::string& path, const std::vector<std::string>& inputs)>
      check_output;
  // Throws unless every device of the list is present ("moe bench: ... device 3").
  std::function<void(const std::string& command, const std::vector<int>& devices)> require_devices;
};

// --seed: itself when >= 0, otherwise a fresh one from std::random_device.
std::uint64_t resolve_seed(long long seed);

// The exact command line of this process, for provenance (from /proc/self/cmdline).
std::vector<std::string> own_command_line();

void print_to(std::ostream& out, const char* format, ...) __attribute__((format(printf, 2, 3)));
void vprint_to(std::ostream& out, const char* format, va_list args);

}  // namespace xstage::testing
