#!/usr/bin/env bash
# First command of the README: installs what is missing, builds, installs the Python package
# (`import xstage`) and runs the main job (`xstage plan`: the design test for the built-in DiT
# attention and MoE workloads).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install_deps.sh"
"$root/scripts/build.sh"
"$root/scripts/python_package.sh" install
"${XSTAGE_BUILD_DIR:-$root/build}/xstage" plan
