#!/usr/bin/env bash
# Second command of the README: builds and runs every test (GPU tests skip where no GPU is present),
# then builds the Python package into a fresh virtual environment and runs its tests (tests/python).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${XSTAGE_BUILD_DIR:-$root/build}
"$root/scripts/install_deps.sh"
"$root/scripts/build.sh"
ctest --test-dir "$build" --output-on-failure -j "${XSTAGE_JOBS:-2}" "$@"
"$root/scripts/python_package.sh" install "$build/pyvenv" pytest numpy
XSTAGE_CLI="$build/xstage" "$build/pyvenv/bin/python" -m pytest -q -p no:cacheprovider "$root/tests/python"
