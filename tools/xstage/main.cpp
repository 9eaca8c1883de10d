// xstage: measure, model and exploit the X-Stage of device-initiated remote stores.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>

#include "registry.hpp"
#include "xstage/model/error.hpp"

namespace xstage::cli {
std::vector<Subcommand>& subcommand_registry() {
  static std::vector<Subcommand> registry;
  return registry;
}
}  // namespace xstage::cli

int main(int argc, char** argv) {
  CLI::App app{
      "xstage: measure, model and exploit the X-Stage (post-issue progress of GPU remote stores)",
      "xstage"};
  app.require_subcommand(1);
  app.fallthrough(false);
  auto& registry = xstage::cli::subcommand_registry();
  std::sort(registry.begin(), registry.end(), [](const auto& a, const auto& b) { return a.order < b.order; });
  for (const auto& sub : registry) sub.add(app);
  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    std::string names;
    for (const auto& sub : registry) {
      known = known || sub.name == std::string(argv[1]);
      names += std::string(names.empty() ? "" : ", ") + sub.name;
    }
    if (!known) {
      std::fprintf(stderr, "xstage: error: unknown command \"%s\" (commands: %s)\n", argv[1], names.c_str());
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "xstage: error: %s\n", e.what());
    return 2;
  } catch (const xstage::InputError& e) {
    std::fprintf(stderr, "xstage: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "xstage: failed: %s\n", e.what());
    return 1;
  }
  return 0;
}
