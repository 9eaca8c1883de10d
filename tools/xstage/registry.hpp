// Subcommand registry: each cmd_*.cpp adds itself with XSTAGE_SUBCOMMAND, so GPU-only subcommands
// are present exactly when their files are compiled in.
#pragma once

#include <CLI/CLI.hpp>
#include <vector>

namespace xstage::cli {

struct Subcommand {
  const char* name;
  int order;  // position in --help
  void (*add)(CLI::App& root);
};

std::vector<Subcommand>& subcommand_registry();

struct SubcommandRegistrar {
  SubcommandRegistrar(const char* name, int order, void (*add)(CLI::App&)) {
    subcommand_registry().push_back({name, order, add});
  }
};

}  // namespace xstage::cli

#define XSTAGE_SUBCOMMAND(NAME, ORDER, FN) \
  static ::xstage::cli::SubcommandRegistrar xstage_subcommand_registrar_##FN(NAME, ORDER, FN)
