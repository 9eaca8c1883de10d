#include "xstage/testing/bench_host.hpp"

#include <cstdarg>
#include <cstdio>
#include <fstream>
#include <random>

namespace xstage::testing {

std::uint64_t resolve_seed(long long seed) {
  if (seed >= 0) return std::uint64_t(seed);
  std::random_device rd;
  return std::uint64_t(rd()) << 32 | rd();
}

std::vector<std::string> own_command_line() {
  std::vector<std::string> args;
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::string a;
  while (std::getline(f, a, '\0')) args.push_back(a);
  return args;
}

void vprint_to(std::ostream& out, const char* format, va_list args) {
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  if (n <= 0) return;
  std::string s(size_t(n) + 1, '\0');
  std::vsnprintf(s.data(), s.size(), format, args);
  s.resize(size_t(n));
  out << s;
}

void print_to(std::ostream& out, const char* format, ...) {
  va_list args;
  va_start(args, format);
  vprint_to(out, format, args);
  va_end(args);
}

}  // namespace xstage::testing
