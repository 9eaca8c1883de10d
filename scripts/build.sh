#!/usr/bin/env bash
# Configures (once) and builds xstage into build/ with Ninja. Extra arguments are passed to cmake.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${XSTAGE_BUILD_DIR:-$root/build}
export PATH=$PATH:/usr/local/cuda/bin
launcher=()
# ccache, where installed, shares compiled objects between build folders and rebuilds.
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
if [ ! -f "$build/build.ninja" ] || [ $# -gt 0 ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" "$@"
fi
cmake --build "$build" -j "${XSTAGE_JOBS:-2}"
