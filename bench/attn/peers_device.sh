#!/usr/bin/env bash
# On the GPU machine, in two calls made back to back (bench/attn/peers_pack.sh lays out their carries):
#   stage  (carry .carry/peers1)  keeps FA4 part a, FA4's wheels and the carried build under /tmp/xstage_peers for
#          the next call, then runs the attention and Ulysses GPU tests (gtest filter TESTS) and, when SAN names a
#          gtest filter, compute-sanitizer memcheck, racecheck and synccheck over it:
#          $OUT/gpu_tests.txt, $OUT/sanitizer.txt
#   run    (carry .carry/peers2)  installs FA4, then times our attention against FA4's Hopper forward and cuDNN SDPA
#          in one process (bench/attn/attn_vs_cudnn.sh; ATTN_BENCH_ARGS, default the d = 128 grid without
#          PyTorch's FlashAttention-2) and the fused epilogue's one-GPU cost (`xstage attn ulysses --gpus 0`,
#          fa-only against fa-only-tma at ULYSSES_SEQS): $OUT/attn_forward.json and .png, $OUT/ulysses_1gpu_M.json
# GIT_REV: the revision recorded in the JSON (the GPU machine has no .git). BUDGET_S: wall seconds for the call.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${BUDGET_S:-570}
source bench/common/device_env.sh
dir=/tmp/xstage_peers
case "${1:-}" in
  stage | run) ;;
  *) echo "usage: $0 {stage|run} (bench/attn/peers_pack.sh prepares the carries; see its header)" >&2; exit 2 ;;
esac
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv
case "$1" in
  stage)
    rm -rf "$dir" && mkdir -p "$dir/gb" && cp .carry/peers1/* "$dir/" && tar xJf "$dir/gpubin.tar.xz" -C "$dir/gb" ||
      { echo "peers_device: .carry/peers1 is missing or incomplete (bench/attn/peers_pack.sh)" >&2; exit 1; }
    (timeout "$(left 300)" "$dir/gb/tests/xstage_gpu_tests" --gtest_filter="${TESTS:-*Attn*:*Ulysses*}" \
      --gtest_brief=1 2>&1; echo "exit $?") | tail -60 > "$OUT/gpu_tests.txt"
    tail -4 "$OUT/gpu_tests.txt"
    if [ -n "${SAN:-}" ]; then
      sanitize_gpu_tests "$dir/gb/tests/xstage_gpu_tests" "$SAN" 150 > "$OUT/sanitizer.txt" 2>&1
      grep -E "exit|SUMMARY" "$OUT/sanitizer.txt"
    fi
    ;;
  run)
    [ -f "$dir/cu13part.aa" ] && [ -x "$dir/gb/xstage" ] ||
      { echo "peers_device: no $dir from a stage call: run 'stage' first, then 'run' within 30 s" >&2; exit 1; }
    mkdir -p "$dir/b" && mv "$dir"/*.whl "$dir/b/" 2>/dev/null
    cp .carry/peers2/cu13part.ab "$dir/b/" || { echo "peers_device: carry .carry/peers2 with this call" >&2; exit 1; }
    fa4_path=$(bash .carry/peers2/fa4_device_install.sh "$dir" "$dir/b") ||
      { echo "peers_device: FA4 did not install" >&2; exit 1; }
    export PYTHONPATH=$fa4_path${PYTHONPATH:+:$PYTHONPATH}
    export XSTAGE_GIT_REVISION=${GIT_REV:-unknown}
    status=0
    XSTAGE="$dir/gb/xstage" ATTN_BENCH_ARGS=${ATTN_BENCH_ARGS:---no-flash2 --no-head-dim-64} \
      timeout "$(left 420)" bash bench/attn/attn_vs_cudnn.sh "$OUT" 2>&1 | tail -40
    [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "peers_device: attn_vs_cudnn failed" >&2; status=1; }
    for m in ${ULYSSES_SEQS:-16384 65536}; do
      timeout "$(left 90)" "$dir/gb/xstage" attn ulysses --gpus 0 --seq "$m" --heads 4 --variant fa-only,fa-only-tma \
        --passes 2 --iters 20 --out "$OUT/ulysses_1gpu_$m.json" 2>&1 | tail -6
      [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    done
    exit $status
    ;;
esac
