#!/usr/bin/env bash
# First command of the README: installs what is missing, builds, and runs the main job
# (`xstage plan`: the design test for the built-in DiT attention and MoE workloads).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install_deps.sh"
"$root/scripts/build.sh"
"${XSTAGE_BUILD_DIR:-$root/build}/xstage" plan
