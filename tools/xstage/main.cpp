// xstage: measure, model and exploit the X-Stage of device-initiated remote stores.
#include <iostream>
#include <string>
#include <vector>

#include "cli_run.hpp"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  return xstage::cli::run_cli(args, std::cout, std::cerr, /*interactive=*/true);
}
