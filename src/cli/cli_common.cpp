#include "cli_common.hpp"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <mutex>
#include <optional>

#include "cli_version.hpp"
#include "xstage/model/bounded_text.hpp"
#include "xstage/model/error.hpp"
#include "xstage/model/input_file.hpp"
#include "xstage/model/units.hpp"
#include "xstage/planner/requests.hpp"
#include "xstage/testing/bench_host.hpp"

namespace xstage::cli {

namespace {
thread_local std::ostream* t_out = &std::cout;
thread_local std::ostream* t_err = &std::cerr;
thread_local bool t_interactive = true;
thread_local const std::vector<std::string>* t_args = nullptr;
thread_local std::vector<std::string> t_created;

void vprint(std::ostream& os, const char* format, va_list args) { testing::vprint_to(os, format, args); }
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
std::string fmt_g(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

// Parses the whole text as a finite decimal number (no hex, no nan/inf); nullopt otherwise.
std::optional<double> parse_finite(const std::string& text) {
  if (text.empty() || text.find_first_of("xXpP") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(v)) return std::nullopt;
  // Subnormal values (4e-320) lose their precision and compute as 0: refused like non-finite ones.
  if (std::fpclassify(v) == FP_SUBNORMAL) return std::nullopt;
  return v;
}

CLI::Validator number_check(bool allow_zero) {
  return CLI::Validator(
      [allow_zero](std::string& text) -> std::string {
        const std::optional<double> v = parse_finite(text);
        const std::string rule = allow_zero ? ">= 0" : "> 0";
        if (!v) return "must be a finite number " + rule + ", got \"" + text + "\"";
        if (allow_zero ? *v < 0 : *v <= 0) return "must be " + rule + ", got " + text;
        return {};
      },
      allow_zero ? "NONNEGATIVE" : "POSITIVE");
}

// Integers are decimal: "010" is ten (CLI11 alone would read octal), "0x10" and "1e3" are refused.
const CLI::Validator kDecimalInteger(
    [](std::string& text) -> std::string {
      std::size_t i = (!text.empty() && (text[0] == '-' || text[0] == '+')) ? 1 : 0;
      if (i == text.size() || text.find_first_not_of("0123456789", i) != std::string::npos)
        return "must be a decimal integer, got \"" + text + "\"";
      const std::size_t first = text.find_first_not_of('0', i);
      const std::string digits = first == std::string::npos ? "0" : text.substr(first);
      text = (text[0] == '-' && digits != "0" ? "-" : "") + digits;
      return {};
    },
    "");

const CLI::Validator kFiniteNumber(
    [](std::string& text) -> std::string {
      if (!parse_finite(text)) return "must be a finite decimal number, got \"" + text + "\"";
      return {};
    },
    "");

void apply_to_options(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    if (opt->get_type_size() == 0) continue;  // flags
    const std::string type = opt->get_type_name();
    if (type.rfind("INT", 0) == 0 || type.rfind("UINT", 0) == 0) opt->transform(kDecimalInteger);
    // Checked after the option's own validators, so a range check reports its range for "nan".
    if (type.rfind("FLOAT", 0) == 0) opt->check(kFiniteNumber);
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) apply_to_options(*sub);
}
}  // namespace

const CLI::Validator kPositive = number_check(false);
const CLI::Validator kProducerCount = in_range(static_cast<double>(ranges::kProducers.lo), static_cast<double>(ranges::kProducers.hi));
const CLI::Validator kByteCount = in_range(ranges::kBytes.lo, ranges::kBytes.hi);
const CLI::Validator kDurationUs = in_range(0.0, 1e6);
namespace {
// in_range for a range of the file loaders, its bounds written in full: "--seq: must be in [1, 67108864], got
// 9223372036854775807" (in_range's %g would show 6.71089e+07).
CLI::Validator integer_range(const IntRange& r) {
  const std::string range = "[" + std::to_string(r.lo) + ", " + std::to_string(r.hi) + "]";
  return CLI::Validator(
      [r, range](std::string& text) -> std::string {
        const std::optional<double> v = parse_finite(text);
        if (!v || *v < static_cast<double>(r.lo) || *v > static_cast<double>(r.hi))
          return "must be in " + range + ", got " + text;
        return {};
      },
      range);
}
}  // namespace
const CLI::Validator kTileEdge = integer_range(ranges::kTileEdge);
const CLI::Validator kSeqLength = integer_range(ranges::kSeqLen);
const CLI::Validator kHeadCount = integer_range(ranges::kHeads);
const CLI::Validator kElementBytes = integer_range(ranges::kElementBytes);
const CLI::Validator kGemmDimension = integer_range(ranges::kGemmDim);
const CLI::Validator kExpertCount = integer_range(ranges::kExperts);
const CLI::Validator kRankCount = integer_range(ranges::kRanks);
const CLI::Validator kNonNegative = number_check(true);

CLI::Validator in_range(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        const std::optional<double> v = parse_finite(text);
        if (!v || *v < lo || *v > hi) return "must be in [" + fmt_g(lo) + ", " + fmt_g(hi) + "], got " + text;
        return {};
      },
      "[" + fmt_g(lo) + ", " + fmt_g(hi) + "]");
}

void apply_number_conventions(CLI::App& app) { apply_to_options(app); }

const std::vector<OptionNeed> kOptionNeeds = {
    {"simulate", "--latency-us", "--completion-coupled"},
    {"simulate", "--force", "--trace"},
    {"fidelity", "--force", "--out"},
    {"trace", "--force", "--out"},
    {"attn bench", "--force", "--out"},
    {"attn ulysses", "--force", "--out"},
    {"moe bench", "--trace-dump", "--trace"},
    {"moe bench", "--trace-dump-ctas", "--trace-dump"},
    {"moe bench", "--trace-iters", "--trace"},
    {"moe bench", "--local-store-control", "--trace"},
};

void apply_option_needs(CLI::App& app) {
  for (const OptionNeed& n : kOptionNeeds) {
    CLI::App* cmd = &app;
    std::istringstream words(n.command);
    for (std::string w; cmd && words >> w;) {
      CLI::App* next = nullptr;
      for (CLI::App* sub : cmd->get_subcommands([](CLI::App*) { return true; }))
        if (sub->get_name() == w) next = sub;
      cmd = next;
    }
    if (!cmd) continue;  // a GPU command this build does not have
    CLI::Option* option = cmd->get_option_no_throw(n.option);
    CLI::Option* needed = cmd->get_option_no_throw(n.needs);
    if (option && needed) option->needs(needed);
  }
}

CLI::Option* add_platform_option(CLI::App* cmd, std::string& path) {
  return cmd->add_option("--platform", path, "Platform file (xstage.platform/1); default: the embedded platform")
      ->check(CLI::ExistingFile);
}
CLI::Option* add_json_option(CLI::App* cmd, bool& json, const std::string& what) {
  return cmd->add_flag("--json", json, what);
}
const CLI::Validator kOutputPath(
    [](std::string& v) { return v.empty() ? std::string("empty path (give a file name)") : std::string(); }, "PATH");

CLI::Option* add_out_option(CLI::App* cmd, std::string& path, const std::string& what) {
  // An empty value is refused here: commands test `out.empty()` for "no --out", so `--out ''` would
  // otherwise write nothing and succeed.
  return cmd->add_option("--out", path, what + " (refused if it exists, unless --force)")->check(kOutputPath);
}
CLI::Option* add_force_option(CLI::App* cmd, bool& force, const std::string& what) {
  return cmd->add_flag("--force", force, what);
}
CLI::Option* add_seed_option(CLI::App* cmd, long long& seed, const std::string& what) {
  return cmd->add_option("--seed", seed, what + " (-1: a fresh seed each run)")->check(in_range(-1, 9.2e18));
}
CLI::Option* add_gpus_option(CLI::App* cmd, std::string& gpus, const std::string& what) {
  return cmd->add_option("--gpus", gpus, what + " (comma-separated CUDA device ordinals)")->capture_default_str();
}
CLI::Option* add_timeout_option(CLI::App* cmd, double& timeout_s, const std::string& what) {
  return cmd->add_option("--timeout-s", timeout_s, what + " (seconds)")->check(in_range(0.001, 86400))->capture_default_str();
}

CLI::Option* add_sm_tflops_option(CLI::App* cmd, double& sm_tflops) {
  return cmd->add_option("--sm-tflops", sm_tflops,
                         "per-SM Tensor Core TFLOP/s of the predicted tile times (default: the platform's rate at "
                         "--precision, measured from the traced kernels where the platform file has one)")
      ->check(in_range(0.01, 1000));
}
CLI::Option* add_zipf_option(CLI::App* cmd, double& zipf_s) {
  return cmd->add_option("--zipf-s,--zipf", zipf_s, "Zipf exponent of skewed routing (--zipf: deprecated spelling)")
      ->check(in_range(0.01, 100))
      ->capture_default_str();
}
CLI::Option* add_lead_rows_option(CLI::App* cmd, int& lead_rows) {
  return cmd->add_option("--lead-rows", lead_rows,
                         "D of the interleaved order in rows (0: the fused layer's default, model::moe_default_lead_rows: "
                         "max(eq. 16's D_knee, ceil((grid / 2) / ceil(h_inter / 128)) + 2))")
      ->check(in_range(0, 1 << 20))
      ->capture_default_str();
}
CLI::Option* add_experts_per_wave_option(CLI::App* cmd, int& experts) {
  return cmd->add_option("--experts-per-wave", experts, "experts per wave of the expert-wave order (0: a quarter of the local experts)")
      ->check(in_range(0, 1 << 20))
      ->capture_default_str();
}


namespace {
using planner::platform_source;
}  // namespace

void stamp_json(nlohmann::json& j, const std::string& schema) { planner::stamp_output(j, schema); }
void stamp_json(nlohmann::json& j, const std::string& schema, const std::string& platform_path,
                const model::Platform& platform) {
  planner::stamp_output(j, schema, platform_path, platform);
}
std::vector<std::string> take_created_files() {
  std::vector<std::string> files;
  files.swap(t_created);
  return files;
}

CommandLineScope::CommandLineScope(const std::vector<std::string>& args) : prev_(t_args) { t_args = &args; }
CommandLineScope::~CommandLineScope() { t_args = prev_; }

void stamp_provenance(nlohmann::json& j, const std::vector<std::string>& inputs) {
  nlohmann::json command = nlohmann::json::array({"xstage"});
  if (t_args != nullptr)
    for (const auto& a : *t_args) command.push_back(a);
  nlohmann::json files = nlohmann::json::array();
  for (const auto& path : inputs) {
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(path, ec);
    files.push_back({{"path", path}, {"bytes", ec ? nlohmann::json(nullptr) : nlohmann::json(bytes)}});
  }
  j["provenance"] = {{"git_revision", kXstageGitRevision},
                     {"git_describe", kXstageGitDescribe},
                     {"xstage_version", kBuildInfo.version},
                     {"command", std::move(command)},
                     {"inputs", std::move(files)}};
}


void print_json(const nlohmann::json& j) { out_stream() << j.dump(2) << std::endl; }




void print_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& raw_rows) {
  // Cells may carry user data (names from files): escaped to one line each.
  std::vector<std::vector<std::string>> rows = raw_rows;
  for (auto& r : rows)
    for (auto& c : r) c = shown_text(c, 1000);
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


void write_file_atomically(const std::string& path, const std::string& text, bool force,
                           const std::vector<std::string>& inputs, const std::string& option) {
  if (interactive()) remove_output_temporaries_on_signals();
  if (write_output_file(path, text, force, inputs, option)) t_created.push_back(path);
}

model::BurstGapInput burst_gap_input(int producers, double bytes_per_producer, double gap_us,
                                     std::optional<double> t_iss0_us, std::optional<double> capacity_bytes) {
  model::BurstGapInput in{producers, bytes_per_producer, units::us_to_s(gap_us), std::nullopt, capacity_bytes};
  if (t_iss0_us) in.t_iss0_override_s = units::us_to_s(*t_iss0_us);
  return in;
}

int platform_max_producers(const model::Platform& p) { return planner::platform_max_producers(p); }

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
