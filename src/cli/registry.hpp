// Subcommand registry: each cmd_*.cpp defines register_cmd_<file>() with XSTAGE_SUBCOMMAND, and the
// build generates one function calling those of the files it compiles (cli_registry.cpp, see
// CMakeLists.txt), so GPU-only subcommands are present exactly when their files are compiled in. An
// explicit call (rather than a static registrar object) keeps every subcommand linked when the CLI is
// a static library.
#pragma once

#include <CLI/CLI.hpp>
#include <vector>

namespace xstage::cli {

struct Subcommand {
  const char* name;
  int order;  // position in --help
  void (*add)(CLI::App& root);
};

// Every subcommand compiled into this build, in --help order; a fresh list each call.
std::vector<Subcommand> subcommands();

}  // namespace xstage::cli

// FILE_ID: the file's name without extension (cmd_model for cmd_model.cpp).
// Used at global scope, after the file's namespaces close.
#define XSTAGE_SUBCOMMAND(FILE_ID, NAME, ORDER, FN) \
  namespace xstage::cli {                                                                  \
  void register_##FILE_ID(std::vector<Subcommand>& r) { r.push_back({NAME, ORDER, FN}); } \
  }
