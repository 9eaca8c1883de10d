// Every command line of README.md and docs/cli.md that needs no GPU runs as written: the ```sh blocks'
// lines starting with `build/xstage` whose subcommand is CPU-only, in a folder holding the files they
// name, exit 0.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli_fixtures.hpp"

namespace {

namespace fs = std::filesystem;

// The README's command lines: inside ```sh fences, starting with build/xstage; comments and optional
// parts ([--json]) dropped.
std::vector<std::string> readme_command_lines(const std::string& doc) {
  std::ifstream f(std::string(XSTAGE_SOURCE_DIR) + "/" + doc);
  std::vector<std::string> lines;
  std::string line;
  bool in_sh = false;
  while (std::getline(f, line)) {
    if (line.rfind("```", 0) == 0) {
      in_sh = !in_sh && line.rfind("```sh", 0) == 0;
      continue;
    }
    if (!in_sh || line.rfind("build/xstage", 0) != 0) continue;
    const std::size_t hash = line.find(" #");
    if (hash != std::string::npos) line.resize(hash);
    line = std::regex_replace(line, std::regex(R"(\s*\[[^\]]*\])"), "");
    line = std::regex_replace(line, std::regex(R"(\s+$)"), "");
    lines.push_back(line);
  }
  return lines;
}

std::string subcommand_of(const std::string& line) {
  std::istringstream s(line);
  std::string bin, sub;
  s >> bin >> sub;
  return sub;
}

int run_in(const fs::path& dir, const std::string& line, std::string& output) {
  const std::string cmd = "cd '" + dir.string() + "' && " + std::string(XSTAGE_CLI_PATH) +
                          line.substr(std::string("build/xstage").size()) + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  while (std::size_t n = std::fread(buf.data(), 1, buf.size(), p)) output.append(buf.data(), n);
  const int status = ::pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The files the README's lines read: a schedule, calibration records the fit accepts, the committed results,
// platforms and kernel descriptions.
void write_inputs(const fs::path& dir) {
  std::ofstream(dir / "my_kernel.json") << R"({"schema": "xstage.schedule/1", "producers": [
      {"count": 148, "repeat": 40, "steps": [{"burst_bytes": 32768}, {"compute_us": 2.0}]}]})";
  xstage::test::write_fit_records(dir / "records.csv");
  // Lines that read the committed measurements (results/...) see the repository's folder.
  fs::create_directory_symlink(fs::path(XSTAGE_SOURCE_DIR) / "results", dir / "results");
  fs::create_directory_symlink(fs::path(XSTAGE_SOURCE_DIR) / "platforms", dir / "platforms");
  fs::create_directory_symlink(fs::path(XSTAGE_SOURCE_DIR) / "kernels", dir / "kernels");
}

void run_every_cpu_line(const std::string& doc, int at_least) {
  const std::set<std::string> cpu_only = {"model", "plan", "simulate", "fit", "fidelity", "paper", "--version", "--help"};
  const fs::path dir = fs::path(testing::TempDir()) / ("xstage_readme_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_inputs(dir);
  int ran = 0;
  for (const std::string& line : readme_command_lines(doc)) {
    if (!cpu_only.count(subcommand_of(line))) continue;
    std::string output;
    EXPECT_EQ(run_in(dir, line, output), 0) << doc << ": " << line << "\n" << output;
    ++ran;
  }
  EXPECT_GE(ran, at_least) << doc;
  fs::remove_all(dir);
}

// The README's quick start: at least plan and model.
TEST(Readme, EveryCpuCommandLineRuns) { run_every_cpu_line("README.md", 2); }

// The CLI reference lists at least plan, model, plan attn, plan moe, two simulate lines and fit.
TEST(Readme, EveryCpuCommandLineOfTheCliReferenceRuns) { run_every_cpu_line("docs/cli.md", 7); }

}  // namespace
