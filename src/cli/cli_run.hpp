// In-process entry point of the xstage CLI: runs one command exactly as `xstage ARGS...` would.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace xstage::cli {

// Parses and runs `args` (without the program name) on a fresh command tree. Everything the command
// prints goes to `out` (its stdout) and `err` (its stderr). Returns the exit code: 0 success, 2 bad
// input (nothing written), 1 failure, or a command's own code (probe: 3 on failed verification).
// Never throws and never exits; calls on different threads do not share state.
int run_cli(const std::vector<std::string>& args, std::string& out, std::string& err);

// As run_cli, writing to streams. `interactive`: the streams are the process's terminal (the xstage
// binary), so long GPU runs may also print progress to the real stderr as they go.
int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err, bool interactive);

// `xstage --version`: version, git revision, build type and the CUDA/NCCL/CUTLASS it was built with.
std::string version_text();

}  // namespace xstage::cli
