#!/usr/bin/env bash
# Second command of the README: builds and runs every test (GPU tests skip where no GPU is present), compiles
# the attention kernels' tuning variants, then builds the Python package into a fresh virtual environment with
# the pinned PyTorch (its CPU tests: the custom op, the SDPA route, diffusers' backends) and diffusers, runs its
# tests (tests/python) and mypy.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${XSTAGE_BUILD_DIR:-$root/build}
"$root/scripts/install_deps.sh"
"$root/scripts/build.sh"
# Every tuning variant of the attention kernels compiles (xstage/sched/attn_tuning.hpp): two more build folders,
# only the attention and Ulysses CUDA objects (about 3 minutes on 2 cores without ccache hits).
"$root/scripts/tuning_builds.sh"
ctest --test-dir "$build" --output-on-failure -j "${XSTAGE_JOBS:-2}" "$@"
# The CPU-only code again under AddressSanitizer + UndefinedBehaviorSanitizer (clang, build-asan/), and
# 60 s of libFuzzer over every input loader (about 18 minutes on 2 cores from a clean clone).
"$root/scripts/sanitize.sh"
# The versions the README's supported-versions table names as tested (pip's cache keeps the downloads).
"$root/scripts/python_package.sh" install "$build/pyvenv" pytest numpy mypy torch==2.11.0 diffusers==0.42.1
XSTAGE_CLI="$build/xstage" "$build/pyvenv/bin/python" -m pytest -q -p no:cacheprovider "$root/tests/python"
(cd "$root" && "$build/pyvenv/bin/python" -m mypy)
