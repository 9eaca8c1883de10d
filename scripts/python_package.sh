#!/usr/bin/env bash
# Builds the Python package `xstage` with pip (scikit-build-core driving the same CMake as the CLI, in
# the stable folder BUILD-wheel beside BUILD: a rebuild is incremental, and ccache, whose base_dir
# makes paths relative to the build folder, shares the objects compiled in BUILD, at the same depth).
#   python_package.sh install                  into python3's own environment (scripts/setup.sh)
#   python_package.sh install VENV [PKG...]    into a fresh virtual environment VENV, with PKG... from PyPI
#   python_package.sh wheel DIR                the raw wheel (py3-none-linux_x86_64) into DIR; scripts/wheel.sh
#                                              repairs it into the manylinux wheel package indexes accept
# Run after scripts/build.sh: the CUTLASS headers are those its configure step found.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${XSTAGE_BUILD_DIR:-$root/build}
export PATH=$PATH:/usr/local/cuda/bin
# pip builds in an isolated environment without the nvidia-cutlass package: pass its headers' path.
if [ -z "${XSTAGE_CUTLASS_INCLUDE:-}" ] && [ -f "$build/CMakeCache.txt" ]; then
  inc=$(sed -n 's/^XSTAGE_CUTLASS_INCLUDE:PATH=//p' "$build/CMakeCache.txt")
  if [ -n "$inc" ]; then export XSTAGE_CUTLASS_INCLUDE=$inc; fi
fi
# The same host compiler as that build (scikit-build-core would otherwise take Python's own CXX), so
# that ccache finds the objects already compiled there.
if [ -z "${CXX:-}" ] && [ -f "$build/CMakeCache.txt" ]; then
  cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:FILEPATH=//p' "$build/CMakeCache.txt")
  if [ -n "$cxx" ]; then export CXX=$cxx; fi
fi
# As scripts/install_deps.sh: quiet, no root warning, Debian's python3 outside a venv allowed (PEP 668).
export PIP_ROOT_USER_ACTION=ignore PIP_BREAK_SYSTEM_PACKAGES=1 PIP_DISABLE_PIP_VERSION_CHECK=1
pip_args=(-q --config-settings=build-dir="$build-wheel")
mode=${1:-install}
case "$mode" in
  install)
    if [ $# -ge 2 ]; then
      venv=$2
      shift 2
      python3 -c 'import venv, ensurepip' 2>/dev/null ||
        { echo "python_package: python3 has no venv/ensurepip (Debian: apt-get install python3-venv)" >&2; exit 1; }
      python3 -m venv --clear "$venv"
      "$venv/bin/python" -m pip install "${pip_args[@]}" "$root" "$@"
    else
      python3 -m pip install "${pip_args[@]}" "$root"
    fi
    ;;
  wheel)
    [ $# -eq 2 ] || { echo "usage: python_package.sh wheel DIR" >&2; exit 2; }
    python3 -m pip wheel "${pip_args[@]}" --no-deps -w "$2" "$root"
    ;;
  *)
    echo "python_package: unknown mode \"$mode\" (install or wheel)" >&2
    exit 2
    ;;
esac
