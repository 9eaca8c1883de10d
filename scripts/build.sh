#!/usr/bin/env bash
# Configures (once) and builds xstage into build/ with Ninja. Extra arguments are passed to cmake.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${XSTAGE_BUILD_DIR:-$root/build}
export PATH=$PATH:/usr/local/cuda/bin
if [ ! -f "$build/build.ninja" ] || [ $# -gt 0 ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
fi
cmake --build "$build" -j "${XSTAGE_JOBS:-2}"
