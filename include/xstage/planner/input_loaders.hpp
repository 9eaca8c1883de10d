// Every input file format the tools read, in one registry: its name, the text parser the file loader
// uses (after read_input_file's regular-file and size checks) and the CLI option that reads it. The
// loader fuzz test (tests/cpu/test_loader_fuzz.cpp) and the libFuzzer harnesses (tests/fuzz) walk this
// list, so a loader added here is fuzzed, and a loader must be added here to be accepted by that test.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace xstage::planner {

struct InputLoader {
  std::string_view name;    // stable id: "platform", "records", "raw", ...
  std::string_view format;  // what the file holds ("xstage.platform/1 JSON")
  std::string_view option;  // the CLI option that reads it ("--platform")
  // Parses the whole file text; every problem is an xstage::InputError naming `origin` (never another
  // exception, a signal or unbounded work).
  void (*parse)(std::string_view text, const std::string& origin);
};

const std::vector<InputLoader>& input_loaders();
// The loader named `name`, or nullptr.
const InputLoader* find_input_loader(std::string_view name);

}  // namespace xstage::planner
