#include "cli_common.hpp"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <unistd.h>

#include "xstage/model/error.hpp"
#include "xstage/model/units.hpp"

namespace xstage::cli {

namespace {
thread_local std::ostream* t_out = &std::cout;
thread_local std::ostream* t_err = &std::cerr;
thread_local bool t_interactive = true;

void vprint(std::ostream& os, const char* format, va_list args) {
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  if (n <= 0) return;
  std::string buf(static_cast<std::size_t>(n) + 1, '\0');
  std::vsnprintf(buf.data(), buf.size(), format, args);
  buf.resize(static_cast<std::size_t>(n));
  os << buf;
}
}  // namespace

std::ostream& out_stream() { return *t_out; }
std::ostream& err_stream() { return *t_err; }
bool interactive() { return t_interactive; }

void out_printf(const char* format, ...) {
  va_list args;
  va_start(args, format);
  vprint(*t_out, format, args);
  va_end(args);
}
void err_printf(const char* format, ...) {
  va_list args;
  va_start(args, format);
  vprint(*t_err, format, args);
  va_end(args);
}

OutputScope::OutputScope(std::ostream& out, std::ostream& err, bool interactive)
    : prev_out_(t_out), prev_err_(t_err), prev_interactive_(t_interactive) {
  t_out = &out;
  t_err = &err;
  t_interactive = interactive;
}
OutputScope::~OutputScope() {
  t_out = prev_out_;
  t_err = prev_err_;
  t_interactive = prev_interactive_;
}

namespace {
CLI::Validator number_check(bool allow_zero) {
  return CLI::Validator(
      [allow_zero](std::string& text) -> std::string {
        double v = 0;
        std::size_t used = 0;
        try {
          v = std::stod(text, &used);
        } catch (const std::exception&) {
          return "must be a number, got \"" + text + "\"";
        }
        if (used != text.size() || !std::isfinite(v)) return "must be a finite number, got \"" + text + "\"";
        if (allow_zero ? v < 0 : v <= 0) return std::string(allow_zero ? "must be >= 0" : "must be > 0") + ", got " + text;
        return {};
      },
      allow_zero ? "NONNEGATIVE" : "POSITIVE");
}
}  // namespace

const CLI::Validator kPositive = number_check(false);
const CLI::Validator kNonNegative = number_check(true);

CLI::Option* add_platform_option(CLI::App* cmd, std::string& path) {
  return cmd->add_option("--platform", path, "Platform file (xstage.platform/1); default: the embedded platform")
      ->check(CLI::ExistingFile);
}

void print_json(const nlohmann::json& j) { out_stream() << j.dump(2) << std::endl; }

void print_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> w(header.size(), 0);
  for (std::size_t c = 0; c < header.size(); ++c) w[c] = header[c].size();
  for (const auto& r : rows)
    for (std::size_t c = 0; c < r.size() && c < w.size(); ++c) w[c] = std::max(w[c], r[c].size());
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s;
    for (std::size_t c = 0; c < w.size(); ++c) {
      const std::string cell = c < cells.size() ? cells[c] : "";
      s += (c == 0 ? cell + std::string(w[c] - cell.size(), ' ') : std::string(w[c] - cell.size(), ' ') + cell);
      if (c + 1 < w.size()) s += "  ";
    }
    out_stream() << s << '\n';
  };
  line(header);
  std::size_t total = 0;
  for (auto x : w) total += x + 2;
  out_stream() << std::string(total - 2, '-') << '\n';
  for (const auto& r : rows) line(r);
}

std::string fmt_num(double x, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, x);
  return buf;
}
std::string fmt_us(double seconds, int decimals) { return fmt_num(units::s_to_us(seconds), decimals); }
std::string fmt_mib(double bytes, int decimals) { return fmt_num(units::bytes_to_mib(bytes), decimals); }

void write_file_atomically(const std::string& path, const std::string& text, bool force) {
  namespace fs = std::filesystem;
  if (fs::exists(path) && !force) throw InputError(path + ": already exists (pass --force to replace it)");
  const fs::path target(path);
  if (target.has_parent_path() && !fs::is_directory(target.parent_path()))
    throw InputError(path + ": directory " + target.parent_path().string() + " does not exist");
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp);
    if (!out) throw InputError(path + ": cannot write");
    out << text;
    out.flush();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw InputError(path + ": write failed");
    }
  }
  fs::rename(tmp, path);
}

model::BurstGapInput burst_gap_input(int producers, double bytes_per_producer, double gap_us,
                                     std::optional<double> t_iss0_us, std::optional<double> capacity_bytes) {
  model::BurstGapInput in{producers, bytes_per_producer, units::us_to_s(gap_us), std::nullopt, capacity_bytes};
  if (t_iss0_us) in.t_iss0_override_s = units::us_to_s(*t_iss0_us);
  return in;
}

int platform_max_producers(const model::Platform& p) {
  int k = 0;
  for (const auto& f : p.issue_floor) k = std::max(k, f.producers);
  return k;
}

std::vector<int> parse_gpu_list(const std::string& option, const std::string& text) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string tok;
  while (std::getline(ss, tok, ',')) {
    char* end = nullptr;
    const long v = std::strtol(tok.c_str(), &end, 10);
    if (tok.empty() || *end != '\0' || v < 0 || v > 1024)
      throw InputError(option + ": '" + text + "' is not a comma-separated list of GPU ordinals");
    if (std::find(out.begin(), out.end(), static_cast<int>(v)) != out.end())
      throw InputError(option + ": GPU " + tok + " listed twice in '" + text + "'");
    out.push_back(static_cast<int>(v));
  }
  if (out.empty()) throw InputError(option + ": empty GPU list");
  return out;
}

}  // namespace xstage::cli
