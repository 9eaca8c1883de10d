#!/usr/bin/env bash
# Second command of the README: builds and runs every test (GPU tests skip where no GPU is present).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install_deps.sh"
"$root/scripts/build.sh"
ctest --test-dir "${XSTAGE_BUILD_DIR:-$root/build}" --output-on-failure -j "${XSTAGE_JOBS:-2}" "$@"
