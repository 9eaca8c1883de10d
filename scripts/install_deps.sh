#!/usr/bin/env bash
# Installs what xstage needs to build and test on a Debian machine, skipping what is already present.
# Debian: cmake (>= 3.25), ninja, g++, GoogleTest, CLI11, nlohmann-json, fmt, DLPack, ccache, clang (sanitizer and fuzz builds).
# PyPI: nvidia-cutlass (pinned; CUTLASS 4 / CuTe headers for the kernels) and matplotlib (plots).
set -euo pipefail
CUTLASS_PIN="nvidia-cutlass==4.2.0.0"

# (No `| grep -q` under pipefail anywhere here: grep exiting early can fail the pipeline with SIGPIPE.)
have_pkg() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]; }
wanted=(cmake ninja-build g++ libgtest-dev libcli11-dev nlohmann-json3-dev libfmt-dev libdlpack-dev ccache clang)
# python3 may come from elsewhere (pyenv): only ask Debian for it when no python3 with pip is on PATH.
if ! python3 -m pip --version >/dev/null 2>&1; then wanted+=(python3 python3-pip); fi
# scripts/test.sh runs the Python tests in a fresh virtual environment: Debian's python3 needs python3-venv.
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then wanted+=(python3-venv); fi
pkgs=()
for p in "${wanted[@]}"; do have_pkg "$p" || pkgs+=("$p"); done
if [ ${#pkgs[@]} -gt 0 ]; then
  echo "install_deps: apt-get install ${pkgs[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${pkgs[@]}" >/dev/null
fi

# PyPI packages: only when nvcc is present do the kernels need CUTLASS; matplotlib is for plots.
pip_args=(-q --disable-pip-version-check)
python3 -m pip --version >/dev/null 2>&1 || { echo "install_deps: python3 has no pip" >&2; exit 1; }
pip_help=$(python3 -m pip install --help 2>/dev/null)
if [ "$(id -u)" -eq 0 ] && [[ $pip_help == *--root-user-action* ]]; then
  pip_args+=(--root-user-action=ignore)
fi
# Debian's own python3 refuses installs outside a virtual environment without this flag (PEP 668).
if [[ $pip_help == *--break-system-packages* ]] &&
   python3 -c 'import sys; sys.exit(0 if sys.prefix == sys.base_prefix and sys.prefix.startswith("/usr") else 1)'; then
  pip_args+=(--break-system-packages)
fi
want_pip=()
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  # `pip show` exits 1 for a package that is not installed: ask Python for the version instead.
  installed=$(python3 -c 'import importlib.metadata as m; print(m.version("nvidia-cutlass"))' 2>/dev/null || true)
  [ "$installed" = "${CUTLASS_PIN#*==}" ] || want_pip+=("$CUTLASS_PIN")
fi
python3 -c 'import matplotlib' >/dev/null 2>&1 || want_pip+=(matplotlib)
if [ ${#want_pip[@]} -gt 0 ]; then
  echo "install_deps: pip install ${want_pip[*]}"
  python3 -m pip install "${pip_args[@]}" "${want_pip[@]}"
fi
