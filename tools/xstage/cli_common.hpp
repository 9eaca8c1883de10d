// Helpers shared by the subcommands: platform option, output (human table or JSON), safe file writes.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "xstage/model/audit.hpp"
#include "xstage/model/platform.hpp"

namespace xstage::cli {

// --- where a command's output goes --------------------------------------------------------------
// Every subcommand writes through out_stream()/err_stream(): the streams of the run_cli call running
// on this thread (thread-local, so concurrent in-process calls do not mix).
std::ostream& out_stream();
std::ostream& err_stream();
void out_printf(const char* format, ...) __attribute__((format(printf, 1, 2)));
void err_printf(const char* format, ...) __attribute__((format(printf, 1, 2)));
// True when the streams are the process's own stdout/stderr (the xstage binary), so long GPU runs may
// also print progress directly; false for in-process calls that capture the output.
bool interactive();

// Binds the output of commands run on this thread to `out`/`err` for the scope's lifetime.
class OutputScope {
 public:
  OutputScope(std::ostream& out, std::ostream& err, bool interactive);
  ~OutputScope();
  OutputScope(const OutputScope&) = delete;
  OutputScope& operator=(const OutputScope&) = delete;

 private:
  std::ostream* prev_out_;
  std::ostream* prev_err_;
  bool prev_interactive_;
};

// Thrown to end a command with a specific exit code (never std::exit: the CLI also runs in-process).
// The command has already printed its message.
struct CommandExit {
  int code;
};

// --platform FILE (default: the embedded platform). The file must exist when given.
CLI::Option* add_platform_option(CLI::App* cmd, std::string& path);

// Validators whose messages name the value: "--producers: must be > 0, got -3".
extern const CLI::Validator kPositive;
extern const CLI::Validator kNonNegative;

void print_json(const nlohmann::json& j);

// Plain text table: header row, rule, rows; columns padded to their widest cell.
void print_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);

std::string fmt_us(double seconds, int decimals = 2);
std::string fmt_mib(double bytes, int decimals = 2);
std::string fmt_num(double x, int decimals = 2);

// Writes `text` to `path` through a temporary file and a rename, so an error never leaves a partial
// file; refuses to replace an existing file unless `force`.
void write_file_atomically(const std::string& path, const std::string& text, bool force);

// The audit input of `model` and `simulate`: K × B bursts, gap in µs, optional T_iss0 (µs) and Q overrides.
model::BurstGapInput burst_gap_input(int producers, double bytes_per_producer, double gap_us,
                                     std::optional<double> t_iss0_us, std::optional<double> capacity_bytes);

// Largest producer count measured in the platform's issue floors (the machine's SM count in a
// calibration that ran one producer per SM).
int platform_max_producers(const model::Platform& p);

// Parses a GPU list "0,1" into {0, 1}; throws InputError naming `option` and the text on anything else
// (empty, duplicates, negatives, non-numbers).
std::vector<int> parse_gpu_list(const std::string& option, const std::string& text);

}  // namespace xstage::cli
