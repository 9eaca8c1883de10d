#!/usr/bin/env bash
# On the development machine: lays out what the same-run comparisons with the peers (bench/attn/peers_device.sh)
# carry to the GPU machine, one folder per call, each checked against the 64 MiB one call takes with the working
# tree:
#   .carry/peers1  gpubin.tar.xz (BUILD's xstage and tests/xstage_gpu_tests), FA4's wheels and as much of FA4's
#                  libraries archive as fits (its part a)                       -> peers_device.sh stage
#   .carry/peers2  the rest of that archive (part b), fa4_device_install.sh, the xstage wheel (WHEEL_DIR) and the
#                  peer wheels of PEER_WHEELS that fit                           -> peers_device.sh attn
#   .carry/peers3  the diffusers wheels (bench/python/fetch_wheels.sh) and the peer wheels of PEER_WHEELS that did
#                  not fit call 2 (SageAttention 2, built from its public source outside the tree; cuDNN's
#                  frontend)                                                     -> peers_device.sh fp8, then python
# FA4 comes from FA4_TOOLS/fa4_wheels.sh (default ../shared/tools), cached in .fa4. The calls run back to back while
# the GPU machine is warm (30 s): files under /tmp carry over from one call to the next.
#   VARIANTS (optional): NAME=BUILD_DIR ... tuning builds whose xstage and GPU tests travel beside BUILD's in call 1
#                  (gpubin-NAME.tar.xz; peers_device.sh stage tests each, tune times them against BUILD's)
#   BUILD (default build), WHEEL_DIR (default .whl-xstage: `scripts/python_package.sh wheel .whl-xstage`),
#   DIFFUSERS_WHEELS (default .whl-dif), PEER_WHEELS (default ../peers/wheels; may be missing: no such peers)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
BUILD=${BUILD:-build} WHEEL_DIR=${WHEEL_DIR:-.whl-xstage} DIFFUSERS_WHEELS=${DIFFUSERS_WHEELS:-.whl-dif}
PEER_WHEELS=${PEER_WHEELS:-$root/../peers/wheels}
FA4_TOOLS=${FA4_TOOLS:-$root/../shared/tools}
limit=$((64 * 1024 * 1024))
VARIANTS=${VARIANTS:-}
for v in $VARIANTS; do
  [[ "$v" =~ ^[A-Za-z0-9_]+=.+$ ]] || { echo "peers_pack: VARIANTS entry '$v' (expected NAME=BUILD_DIR)" >&2; exit 1; }
done
builds=("$BUILD")
for v in $VARIANTS; do builds+=("${v#*=}"); done
for b in "${builds[@]}"; do
  for f in "$b/xstage" "$b/tests/xstage_gpu_tests"; do
    [ -x "$f" ] || { echo "peers_pack: $f not found: build first (scripts/build.sh)" >&2; exit 1; }
  done
done
ls "$WHEEL_DIR"/xstage-*.whl >/dev/null 2>&1 ||
  { echo "peers_pack: no xstage wheel in WHEEL_DIR=$WHEEL_DIR (scripts/python_package.sh wheel $WHEEL_DIR)" >&2; exit 1; }
ls "$DIFFUSERS_WHEELS"/diffusers-*.whl >/dev/null 2>&1 ||
  { echo "peers_pack: no diffusers wheel in DIFFUSERS_WHEELS=$DIFFUSERS_WHEELS (bench/python/fetch_wheels.sh)" >&2; exit 1; }
[ -f "$FA4_TOOLS/fa4_wheels.sh" ] || { echo "peers_pack: FA4_TOOLS=$FA4_TOOLS has no fa4_wheels.sh" >&2; exit 1; }
bash "$FA4_TOOLS/fa4_wheels.sh" .fa4 >&2
rm -rf .carry/peers1 .carry/peers2 .carry/peers3
mkdir -p .carry/peers1 .carry/peers2 .carry/peers3
cp .fa4/b/*.whl .carry/peers1/
tar cf - -C "$BUILD" xstage tests/xstage_gpu_tests | xz -T0 -6 > .carry/peers1/gpubin.tar.xz
for v in $VARIANTS; do
  tar cf - -C "${v#*=}" xstage tests/xstage_gpu_tests | xz -T0 -6 > ".carry/peers1/gpubin-${v%%=*}.tar.xz"
done
cp "$FA4_TOOLS/fa4_device_install.sh" .carry/peers2/
mkdir -p .carry/peers2/wheels .carry/peers3/wheels
cp "$WHEEL_DIR"/xstage-*.whl .carry/peers2/wheels/
cp "$DIFFUSERS_WHEELS"/*.whl .carry/peers3/wheels/
# What travels besides the carry: tracked files and untracked files git does not ignore.
# A tracked file missing from the work tree does not travel: du skips it and still prints the total.
tree=$(git ls-files -co --exclude-standard -z | { du -cb --files0-from=- 2>/dev/null || true; } | tail -1 | cut -f1)
room() { echo $((limit - (1 << 20) - tree - $(du -sb "$1" | cut -f1))); }
# FA4's libraries archive, split where call 1 is full (1 MiB spare): fa4_device_install.sh only concatenates its
# parts a and b and checks the archive, so the split point is free.
first=$(room .carry/peers1)
(( first > 0 )) || { echo "peers_pack: the working tree and the wheels leave no room in call 1" >&2; exit 1; }
cat .fa4/a/cu13part.aa .fa4/b/cu13part.ab | (head -c "$first" > .carry/peers1/cu13part.aa; cat > .carry/peers2/cu13part.ab)
# Peer wheels: smallest first into call 2 while they fit, the rest into call 3.
if [ -d "$PEER_WHEELS" ]; then
  while read -r size w; do
    if (( size < $(room .carry/peers2) )); then cp "$w" .carry/peers2/wheels/; else cp "$w" .carry/peers3/wheels/; fi
  done < <(find "$PEER_WHEELS" -maxdepth 1 -name '*.whl' -printf '%s %p\n' | sort -n)
else
  echo "peers_pack: no PEER_WHEELS folder $PEER_WHEELS: the 8-bit peers will be reported missing" >&2
fi
status=0
for c in .carry/peers1 .carry/peers2 .carry/peers3; do
  total=$((tree + $(du -sb "$c" | cut -f1)))
  echo "peers_pack: $c: $((total / 1048576)) MiB with the working tree (limit 64): $(cd "$c" && find . -name '*.whl' | sed 's|.*/||' | tr '\n' ' ')"
  # The device tool counted a working tree about 0.4 MiB above `du -b`'s sum: keep 1 MiB spare here too.
  [ "$total" -le $((limit - (1 << 20))) ] ||
    { echo "peers_pack: $c is too large for one call (1 MiB spare needed): fewer tracked bytes or a smaller carry" >&2
      status=1; }
done
exit $status
