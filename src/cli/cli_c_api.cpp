// libxstage_cli.so: the CLI's C ABI (include/xstage/cli_c_api.h) over run_cli (cli_run.hpp).
#include "xstage/cli_c_api.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "cli_run.hpp"

namespace {

// malloc'ed copy, or null when out of memory.
char* copy_out(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p) std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

// Hands `text` to *slot (dropped where slot is null); false when out of memory.
bool hand_out(char** slot, const std::string& text) {
  if (!slot) return true;
  *slot = copy_out(text);
  return *slot != nullptr;
}

// -1 with `message` in *err.
int refuse(char** out, char** err, const std::string& message) {
  if (out) {
    std::free(*out);
    *out = nullptr;
  }
  if (err) {
    std::free(*err);
    *err = copy_out(message);
  }
  return -1;
}

}  // namespace

extern "C" int xstage_cli_c_api_version(void) { return XSTAGE_CLI_C_API_VERSION; }

extern "C" int xstage_cli_run(int argc, const char* const* argv, char** out, char** err) {
  if (out) *out = nullptr;
  if (err) *err = nullptr;
  if (argc < 0 || (argc > 0 && !argv))
    return refuse(out, err, "xstage_cli_run: argc " + std::to_string(argc) + " with a null argv");
  try {
    std::vector<std::string> args;
    args.reserve(static_cast<std::size_t>(argc));
    for (int i = 0; i < argc; ++i) args.emplace_back(argv[i] ? argv[i] : "");
    std::string out_text, err_text;
    const int code = xstage::cli::run_cli(args, out_text, err_text);
    if (!hand_out(out, out_text) || !hand_out(err, err_text)) return refuse(out, err, "out of host memory");
    return code;
  } catch (const std::exception& e) {
    return refuse(out, err, std::string("xstage_cli_run: ") + e.what());
  } catch (...) {
    return refuse(out, err, "xstage_cli_run: unknown C++ exception");
  }
}

extern "C" void xstage_cli_free(char* text) { std::free(text); }
