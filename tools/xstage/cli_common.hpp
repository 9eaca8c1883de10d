// Helpers shared by the subcommands: platform option, output (human table or JSON), safe file writes.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "xstage/model/audit.hpp"
#include "xstage/model/platform.hpp"

namespace xstage::cli {

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
