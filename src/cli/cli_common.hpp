// Helpers shared by the subcommands: platform option, output (human table or JSON), safe file writes.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "xstage/model/audit.hpp"
#include "xstage/model/output_file.hpp"
#include "xstage/model/platform.hpp"
#include "xstage/model/work_limit.hpp"
#include "xstage/planner/text.hpp"

namespace xstage::cli {

// Numbers, user data and the platform in text (xstage/planner/text.hpp, shared with the planner library).
using planner::checked_product;
using planner::escape_bidi;
using planner::fmt_mib;
using planner::fmt_num;
using planner::fmt_us;
using planner::one_line;
using planner::platform_label;
using planner::shown_text;

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

// --- options shared by the subcommands (one name, one unit, one default for each quantity) --------
// --platform FILE (default: the embedded platform). The file must exist when given.
CLI::Option* add_platform_option(CLI::App* cmd, std::string& path);
CLI::Option* add_json_option(CLI::App* cmd, bool& json, const std::string& what = "One JSON object on stdout");
CLI::Option* add_out_option(CLI::App* cmd, std::string& path, const std::string& what);
// Every option naming an output file refuses an empty value (commands read "" as "not given").
extern const CLI::Validator kOutputPath;
CLI::Option* add_force_option(CLI::App* cmd, bool& force, const std::string& what = "Replace --out if it exists");
// --seed N (decimal, >= 0; -1, the default: a fresh seed each run).
CLI::Option* add_seed_option(CLI::App* cmd, long long& seed, const std::string& what);
// --gpus LIST: comma-separated CUDA device ordinals (parse_gpu_list checks it).
CLI::Option* add_gpus_option(CLI::App* cmd, std::string& gpus, const std::string& what);
CLI::Option* add_timeout_option(CLI::App* cmd, double& timeout_s, const std::string& what);

// MoE schedule prediction (plan moe --simulate, moe bench --schedule auto): one option spelling, one
// default. The per-SM GEMM rate defaults to the platform's (model::Platform::gemm_rate_at).
constexpr double kDefaultZipfS = 1.2;
CLI::Option* add_sm_tflops_option(CLI::App* cmd, double& sm_tflops);
CLI::Option* add_zipf_option(CLI::App* cmd, double& zipf_s);          // --zipf-s (--zipf: deprecated)
CLI::Option* add_lead_rows_option(CLI::App* cmd, int& lead_rows);     // 0: the fused layer's default D
CLI::Option* add_experts_per_wave_option(CLI::App* cmd, int& experts);  // 0: a quarter of the local experts

// Range of every producer-side gap (--gap-us) the CLI accepts: up to one second.
constexpr double kMaxGapUs = 1e6;

// Every number on the command line is decimal (no octal "010", no hex) and every floating-point value
// finite; applied once to every option of the tree after registration.
void apply_number_conventions(CLI::App& app);

// Which options take effect only together with another: one table for every command, applied to the
// tree once (an option given without what it needs is refused, never silently ignored). `plan moe`
// refuses its combinations in plan_audits.cpp (check_moe_flags).
struct OptionNeed {
  const char* command;  // subcommand path, "moe bench"
  const char* option;
  const char* needs;
};
extern const std::vector<OptionNeed> kOptionNeeds;
void apply_option_needs(CLI::App& app);

// Validators whose messages name the value: "--producers: must be > 0, got -3".
extern const CLI::Validator kPositive;
extern const CLI::Validator kNonNegative;
// "--gap-us: must be in [0, 1e+06], got nan".
CLI::Validator in_range(double lo, double hi);
// The caps input files apply (xstage/model/input_file.hpp ranges), for the same quantities on the
// command line: producers 1..1e6, bytes 1..1e12, a duration up to 1e6 us.
extern const CLI::Validator kProducerCount;
extern const CLI::Validator kByteCount;
extern const CLI::Validator kDurationUs;
// The same for the shapes of a kernel (xstage/model/input_file.hpp ranges): a tile edge or head dimension
// 1..4096, a sequence length 1..2^26, heads per GPU 1..65536, bytes per element 1..8, a GEMM dimension 1..2^20,
// experts 1..65536, ranks 1..1024.
extern const CLI::Validator kTileEdge;
extern const CLI::Validator kSeqLength;
extern const CLI::Validator kHeadCount;
extern const CLI::Validator kElementBytes;
extern const CLI::Validator kGemmDimension;
extern const CLI::Validator kExpertCount;
extern const CLI::Validator kRankCount;

// --- work and arithmetic limits on user numbers --------------------------------------------------
// require_work_within: xstage/model/work_limit.hpp.


void print_json(const nlohmann::json& j);

// Every JSON output names its schema ("xstage.plan/1"), the xstage version and the platform it used:
// "platform": {"source": "embedded" | "/abs/path.json", "name": ...}.
void stamp_json(nlohmann::json& j, const std::string& schema, const std::string& platform_path,
                const model::Platform& platform);
void stamp_json(nlohmann::json& j, const std::string& schema);  // outputs without a platform
// "provenance": what produced a result file: the build's git revision ("<sha>-dirty.<12 hex digits of the SHA-256
// of git diff HEAD --binary>" when the build's tree had uncommitted changes, src/gpu/git_revision.cmake),
// `git describe`, the command line ("xstage" and the arguments of the running command) and the input files with
// their sizes in bytes. Files under results/ carry it so that every committed figure ties to code.
void stamp_provenance(nlohmann::json& j, const std::vector<std::string>& inputs);
// The files write_file_atomically created (not replaced) for the command running on this thread: run_cli
// removes them when the command's output to stdout fails, so a failed command leaves nothing behind.
std::vector<std::string> take_created_files();
// The arguments of the command running on this thread (set by run_cli for its lifetime).
class CommandLineScope {
 public:
  explicit CommandLineScope(const std::vector<std::string>& args);
  ~CommandLineScope();
  CommandLineScope(const CommandLineScope&) = delete;
  CommandLineScope& operator=(const CommandLineScope&) = delete;

 private:
  const std::vector<std::string>* prev_;
};


// Plain text table: header row, rule, rows (cells escaped by shown_text); columns padded to their
// widest cell.
void print_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);


// --- output files (every --out of every subcommand): xstage/model/output_file.hpp --------------
using xstage::check_output_path;

// write_output_file (xstage/model/output_file.hpp), plus what the command line adds: in the xstage binary a
// signal removes the temporary, and a file it created is listed for take_created_files.
void write_file_atomically(const std::string& path, const std::string& text, bool force,
                           const std::vector<std::string>& inputs = {}, const std::string& option = "--out");

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
