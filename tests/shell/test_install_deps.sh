#!/usr/bin/env bash
# scripts/install_deps.sh as a fresh machine runs it: a Python virtual environment without
# nvidia-cutlass or matplotlib whose pip records what it is asked (nothing is downloaded), a non-root
# user, and dpkg-query / apt-get / sudo stand-ins reporting no Debian package installed. The script
# must ask for every Debian and PyPI package and exit 0.
# Usage: test_install_deps.sh [SCRIPT]   (default: scripts/install_deps.sh of this tree)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
script=${1:-$root/scripts/install_deps.sh}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
log=$tmp/log
: >"$log"

# A bare venv (no pip, no system site packages), then a stand-in `pip` module inside it that behaves
# as pip does for what the script asks: --version, install --help, show (exit 1: not installed), install.
python=$(command -v python3)
"$python" -m venv --without-pip "$tmp/venv"
site=$("$tmp/venv/bin/python3" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
mkdir -p "$site/pip"
: >"$site/pip/__init__.py"
cat >"$site/pip/__main__.py" <<PY
import sys
args = sys.argv[1:]
with open("$log", "a") as f:
    f.write("pip " + " ".join(args) + "\n")
if args[:1] == ["--version"]:
    print("pip 24.0 (recording stand-in)")
elif args[:1] == ["install"] and "--help" in args:
    print("Usage: pip install [options] <requirement specifier>\n  --root-user-action <action>")
elif args[:1] == ["show"]:
    print("WARNING: Package(s) not found: " + " ".join(args[1:]), file=sys.stderr)
    sys.exit(1)
elif args[:1] == ["install"]:
    sys.exit(0)
else:
    sys.exit(2)
PY

bin=$tmp/bin
mkdir -p "$bin"
stand_in() {  # name, body
  printf '#!/usr/bin/env bash\n%s\n' "$2" >"$bin/$1"
  chmod +x "$bin/$1"
}
stand_in dpkg-query "echo \"dpkg-query \$*\" >>'$log'; echo \"dpkg-query: no packages found matching \${@: -1}\" >&2; exit 1"
stand_in apt-get "echo \"apt-get \$*\" >>'$log'"
stand_in sudo "echo \"sudo \$*\" >>'$log'; exec \"\$@\""
stand_in id "if [ \"\${1:-}\" = -u ]; then echo 1000; else exec /usr/bin/id \"\$@\"; fi"
stand_in nvcc "echo 'nvcc: NVIDIA (R) Cuda compiler driver (stand-in)'"

set +e
PATH="$tmp/venv/bin:$bin:/usr/bin:/bin" bash "$script" >"$tmp/stdout" 2>"$tmp/stderr"
rc=$?
set -e
fail=0
report() { echo "FAIL: $*"; fail=1; }
[ "$rc" -eq 0 ] || report "install_deps.sh exited $rc"
install_line=$(grep '^apt-get install' "$log" || true)
# The packages the README names, and whatever else the script's own list holds.
listed=$(sed -n 's/^wanted=(\(.*\))$/\1/p' "$script")
for p in cmake ninja-build g++ libgtest-dev libcli11-dev nlohmann-json3-dev libfmt-dev $listed; do
  [[ " $install_line " == *" $p "* ]] || report "apt-get install was not asked for $p"
done
grep -q '^sudo apt-get install' "$log" || report "apt-get install did not go through sudo for a non-root user"
pin=$(sed -n 's/^CUTLASS_PIN="\(.*\)"$/\1/p' "$script")
[ -n "$pin" ] || report "no CUTLASS_PIN in $script"
pip_line=$(grep '^pip install' "$log" | grep -v -- '--help' || true)
for p in "$pin" matplotlib; do
  [[ " $pip_line " == *" $p "* ]] || report "pip install was not asked for $p"
done
if [ "$fail" -ne 0 ]; then
  echo "--- what the stand-ins were asked:"; cat "$log"
  echo "--- stdout:"; cat "$tmp/stdout"
  echo "--- stderr:"; cat "$tmp/stderr"
  exit 1
fi
echo "install_deps.sh: asked apt-get and pip for every package, exit 0"
