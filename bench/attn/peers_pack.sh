#!/usr/bin/env bash
# On the development machine: lays out what the same-run comparison of our attention with FlashAttention-4 and
# cuDNN (bench/attn/peers_device.sh) carries to the GPU machine, in two folders, so that each call's transfer
# (the working tree plus its carry) stays under the 64 MiB one call takes:
#   .carry/peers1  FA4's wheels, gpubin.tar.xz (BUILD's xstage and tests/xstage_gpu_tests), and as much of FA4's
#                  libraries archive as fits (its part a)
#   .carry/peers2  the rest of that archive (its part b) and fa4_device_install.sh
# FA4 comes from FA4_TOOLS/fa4_wheels.sh (default ../shared/tools), cached in .fa4. Then, back to back while the
# GPU machine is warm (30 s): carry .carry/peers1 and run `bench/attn/run.sh peers-device stage`; carry
# .carry/peers2 and run `bench/attn/run.sh peers-device run`.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
BUILD=${BUILD:-build}
FA4_TOOLS=${FA4_TOOLS:-$root/../shared/tools}
limit=$((64 * 1024 * 1024))
for f in "$BUILD/xstage" "$BUILD/tests/xstage_gpu_tests"; do
  [ -x "$f" ] || { echo "peers_pack: $f not found: build first (scripts/build.sh)" >&2; exit 1; }
done
[ -f "$FA4_TOOLS/fa4_wheels.sh" ] || { echo "peers_pack: FA4_TOOLS=$FA4_TOOLS has no fa4_wheels.sh" >&2; exit 1; }
bash "$FA4_TOOLS/fa4_wheels.sh" .fa4 >&2
rm -rf .carry/peers1 .carry/peers2
mkdir -p .carry/peers1 .carry/peers2
cp .fa4/b/*.whl .carry/peers1/
tar cf - -C "$BUILD" xstage tests/xstage_gpu_tests | xz -T0 -6 > .carry/peers1/gpubin.tar.xz
cp "$FA4_TOOLS/fa4_device_install.sh" .carry/peers2/
# What travels besides the carry: tracked files and untracked files git does not ignore.
tree=$(git ls-files -co --exclude-standard -z | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
# FA4's libraries archive, split where call 1 is full (1 MiB spare): fa4_device_install.sh only concatenates its
# parts a and b and checks the archive, so the split point is free.
first=$((limit - (1 << 20) - tree - $(du -sb .carry/peers1 | cut -f1)))
(( first > 0 )) || { echo "peers_pack: the working tree and the wheels leave no room in call 1" >&2; exit 1; }
cat .fa4/a/cu13part.aa .fa4/b/cu13part.ab | (head -c "$first" > .carry/peers1/cu13part.aa; cat > .carry/peers2/cu13part.ab)
status=0
for c in .carry/peers1 .carry/peers2; do
  total=$((tree + $(du -sb "$c" | cut -f1)))
  echo "peers_pack: $c: $((total / 1048576)) MiB with the working tree (limit 64)"
  [ "$total" -lt "$limit" ] || { echo "peers_pack: $c is too large for one call" >&2; status=1; }
done
exit $status
