// Runs the xstage binary as a user does and captures its exit code, stdout and stderr. Used by every
// CLI test file; each call gets its own stderr file, since ctest runs tests in parallel processes.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

namespace xstage::test {

struct CliRun {
  int code;
  std::string out;  // stdout
  std::string err;  // stderr
};

inline CliRun run_cli(const std::string& args) {
  static std::atomic<int> calls{0};
  const std::string err_path = testing::TempDir() + "/xstage_cli_stderr_" + std::to_string(::getpid()) + "_" +
                               std::to_string(calls++) + ".txt";
  const std::string cmd = std::string(XSTAGE_CLI_PATH) + " " + args + " 2>" + err_path;
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (std::size_t n = std::fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  const int status = ::pclose(p);
  std::ifstream e(err_path);
  std::string err((std::istreambuf_iterator<char>(e)), std::istreambuf_iterator<char>());
  std::remove(err_path.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out, err};
}

// GPU subcommands exist only in builds with CUDA.
inline bool has_subcommand(const std::string& name) { return run_cli(name + " --help").code == 0; }

// A rejected input: non-zero exit and exactly one line on stderr containing every fragment.
template <class... Fragments>
void expect_one_line_error(const CliRun& r, const Fragments&... fragments) {
  EXPECT_NE(r.code, 0) << r.out;
  for (const std::string& f : {std::string(fragments)...})
    EXPECT_NE(r.err.find(f), std::string::npos) << "expected \"" << f << "\" in stderr: " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "stderr: " << r.err;
}

}  // namespace xstage::test
