// C ABI of the model, planner and simulator: the CLI's in-process entry point, so that the Python
// bindings return by construction what `xstage ... --json` prints.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "capi_common.hpp"

#if XSTAGE_CAPI_HAVE_CLI
#include "cli_run.hpp"
#endif

#if XSTAGE_CAPI_HAVE_CLI
namespace {

// malloc'ed copy (freed by xstage_free), or null when out of memory.
char* copy_out(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p) std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

}  // namespace
#endif

extern "C" int xstage_cli_run(int argc, const char* const* argv, char** out, char** err) {
  using namespace xstage::capi;
  if (out) *out = nullptr;
  if (err) *err = nullptr;
  if (argc < 0 || (argc > 0 && !argv)) {
    fail(XSTAGE_ERR_VALUE, "xstage_cli_run: argc " + std::to_string(argc) + " with a null argv");
    return -1;
  }
#if XSTAGE_CAPI_HAVE_CLI
  try {
    std::vector<std::string> args;
    args.reserve(argc);
    for (int i = 0; i < argc; ++i) args.emplace_back(argv[i] ? argv[i] : "");
    std::string out_text, err_text;
    const int code = xstage::cli::run_cli(args, out_text, err_text);
    char* o = copy_out(out_text);
    char* e = copy_out(err_text);
    if (!o || !e) {
      std::free(o);
      std::free(e);
      fail(XSTAGE_ERR_INTERNAL, "out of host memory");
      return -1;
    }
    if (out) *out = o; else std::free(o);
    if (err) *err = e; else std::free(e);
    ok();
    return code;
  } catch (const std::exception& ex) {
    fail(XSTAGE_ERR_INTERNAL, ex.what());
    return -1;
  } catch (...) {
    fail(XSTAGE_ERR_INTERNAL, "unknown C++ exception");
    return -1;
  }
#else
  fail(XSTAGE_ERR_UNSUPPORTED, "xstage was built without the CLI core (xstage_cli_core): no planner bindings");
  return -1;
#endif
}
