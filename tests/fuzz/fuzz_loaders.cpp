// libFuzzer harness over every registered input loader (xstage/planner/input_loaders.hpp): the first
// byte of an input picks the loader, the rest is the file's text. A loader may only accept the text or
// throw xstage::InputError of one bounded line; any other exception, a crash, a sanitizer report, a
// hang or unbounded memory is a finding. XSTAGE_FUZZ_LOADER=<name> fixes the loader (the first byte is
// then text too). scripts/sanitize.sh runs it on tests/fuzz/corpus.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <string_view>

#include "xstage/model/error.hpp"
#include "xstage/planner/input_loaders.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using xstage::planner::input_loaders;
  static const char* fixed_name = std::getenv("XSTAGE_FUZZ_LOADER");
  static const xstage::planner::InputLoader* fixed = fixed_name ? xstage::planner::find_input_loader(fixed_name) : nullptr;
  if (fixed_name && !fixed) {
    std::fprintf(stderr, "XSTAGE_FUZZ_LOADER=%s: no such loader\n", fixed_name);
    std::abort();
  }
  const xstage::planner::InputLoader* loader = fixed;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (!loader) {
    if (size == 0) return 0;
    loader = &input_loaders()[data[0] % input_loaders().size()];
    text.remove_prefix(1);
  }
  const std::string origin = "fuzz/" + std::string(loader->name);
  try {
    loader->parse(text, origin);
  } catch (const xstage::InputError& e) {
    const std::string_view m = e.what();
    // One bounded line naming the file.
    if (m.size() > 600 || m.find('\n') != std::string_view::npos || m.rfind(origin, 0) != 0) {
      std::fprintf(stderr, "%s: unbounded or unnamed message (%zu bytes)\n", loader->name.data(), m.size());
      std::abort();
    }
  }
  return 0;
}
