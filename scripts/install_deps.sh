#!/usr/bin/env bash
# Installs what xstage needs to build and test on a Debian machine, skipping what is already present.
# Debian: cmake (>= 3.25), ninja, g++, GoogleTest, CLI11, nlohmann-json, fmt.
# PyPI: nvidia-cutlass (pinned; CUTLASS 4 / CuTe headers for the kernels) and matplotlib (plots).
set -euo pipefail
CUTLASS_PIN="nvidia-cutlass==4.2.0.0"

need_apt=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for p in cmake ninja-build g++ libgtest-dev libcli11-dev nlohmann-json3-dev libfmt-dev python3 python3-pip; do
  have_pkg "$p" || need_apt+=("$p")
done
# python3 may come from elsewhere (pyenv): only ask Debian for it when no python3 is on PATH.
if command -v python3 >/dev/null; then
  need_apt=("${need_apt[@]/python3}"); need_apt=("${need_apt[@]/python3-pip}")
fi
pkgs=(); for p in "${need_apt[@]}"; do [ -n "$p" ] && pkgs+=("$p"); done
if [ ${#pkgs[@]} -gt 0 ]; then
  echo "install_deps: apt-get install ${pkgs[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${pkgs[@]}" >/dev/null
fi

# PyPI packages: only when nvcc is present do the kernels need CUTLASS; matplotlib is for plots.
pip_args=(-q --disable-pip-version-check)
python3 -m pip --version >/dev/null 2>&1 || { echo "install_deps: python3 has no pip" >&2; exit 1; }
if [ "$(id -u)" -eq 0 ] && python3 -m pip install --help 2>/dev/null | grep -q -- '--root-user-action'; then
  pip_args+=(--root-user-action=ignore)
fi
if python3 -m pip help install 2>/dev/null | grep -q -- '--break-system-packages'; then
  # Debian's own python3 refuses user-level installs without this flag (PEP 668).
  python3 -c 'import sys; sys.exit(0 if sys.prefix == sys.base_prefix and sys.prefix.startswith("/usr") else 1)' \
    && pip_args+=(--break-system-packages)
fi
want_pip=()
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  python3 -m pip show nvidia-cutlass 2>/dev/null | grep -q '^Version: 4.2.0.0$' || want_pip+=("$CUTLASS_PIN")
fi
python3 -c 'import matplotlib' 2>/dev/null || want_pip+=(matplotlib)
if [ ${#want_pip[@]} -gt 0 ]; then
  echo "install_deps: pip install ${want_pip[*]}"
  python3 -m pip install "${pip_args[@]}" "${want_pip[@]}"
fi
