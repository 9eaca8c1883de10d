#!/usr/bin/env bash
# On the GPU machine (two or more GPUs), from the repository root with the build folder carried from the
# development machine: the MoE GPU tests (separate-kernel baseline and fused kernel), then
# `xstage moe bench --impl both --schedule both` (baseline, fused expert-wave, fused interleaved, timed in
# alternation in one process run) over the built-in shapes and token counts, merged into
# $OUT/moe_wave.json; a short table last.
#   BUILD=build-moe bench/moe/moe_device.sh        (PRECISION=fp8: the FP8 W8A8 layers, results in moe_wave_fp8.json)
# Knobs: RUNS (one "shape tokens routing check-tokens" per line; default the list below), TESTS=0 skips the
# GPU tests, TORCH=0 skips the torch grouped GEMMs, ITERS, WARMUP, RUN_TIMEOUT, BENCH_ARGS (appended to
# every `xstage moe bench`, e.g. "--combine both").
set -uo pipefail
PRECISION=${PRECISION:-bf16}
case $PRECISION in
  bf16) result=moe_wave.json ;;
  fp8) result=moe_wave_fp8.json ;;
  *) echo "moe_device: PRECISION must be bf16 or fp8, got '$PRECISION'" >&2; exit 2 ;;
esac
source "$(dirname "${BASH_SOURCE[0]}")/../common/device_env.sh"
mkdir -p "$OUT/runs"
{
  echo "== $(date -u +%FT%TZ)"; nvidia-smi -L
  nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
  ldd "$BUILD/xstage" | grep -E "nccl|not found"
  cublas_lib  # the libcublas.so.13 the baseline will load (bench/common/device_env.sh)
} > "$OUT/moe_device.txt" 2>&1
if [ "${TESTS:-1}" != 0 ]; then
  timeout ${TEST_TIMEOUT:-240} "$BUILD/tests/xstage_gpu_tests" \
    --gtest_filter='Routings/MoeBaselineTest.*:Routings/MoeFusedTest.*:MoeFusedLiveness.*' \
    > "$OUT/moe_gpu_tests.txt" 2>&1
  echo "gpu tests rc=$?" >> "$OUT/moe_device.txt"
fi
# shape tokens routing check-tokens
runs=(
  "qwen3-235b-a22b 1024 balanced 4" "qwen3-235b-a22b 8192 balanced 2" "qwen3-235b-a22b 32768 balanced 2" "qwen3-235b-a22b 8192 skewed 2"
  "deepseek-v3 1024 balanced 2" "deepseek-v3 8192 balanced 2" "deepseek-v3 32768 balanced 1" "deepseek-v3 8192 skewed 2"
  "dit-moe-g2-16e2a 1024 balanced 4" "dit-moe-g2-16e2a 8192 balanced 2" "dit-moe-g2-16e2a 32768 balanced 2"
)
if [ -n "${RUNS:-}" ]; then mapfile -t runs < <(printf '%s\n' "$RUNS" | sed '/^[[:space:]]*$/d'); fi
i=0
for r in "${runs[@]}"; do
  set -- $r
  i=$((i + 1))
  timeout ${RUN_TIMEOUT:-90} "$BUILD/xstage" moe bench --gpus 0,1 --shape "$1" --tokens "$2" --routing "$3" \
    --check-tokens "$4" --precision "$PRECISION" --impl both --schedule both --iters ${ITERS:-10} --warmup ${WARMUP:-3} ${BENCH_ARGS:-} \
    --out "$OUT/runs/run_$i.json" >> "$OUT/moe_device.txt" 2>&1
  echo "run $i ($r) rc=$?" >> "$OUT/moe_device.txt"
done
python3 - "$OUT" "$result" <<'PY'
import json, glob, os, sys
out, result = sys.argv[1], sys.argv[2]
runs = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(out, "runs", "run_*.json")), key=lambda f: int(f.split("_")[-1][:-5]))]
json.dump({"schema": "xstage.moe_bench_set", "version": 2, "runs": runs}, open(os.path.join(out, result), "w"), indent=1)
print(f"{'shape':18s} {'T':>6s} {'routing':8s} {'impl':18s} {'ms':>8s} {'TFLOP/s':>8s} {'NVL GB/s':>8s} {'x base':>7s} check")
for j in runs:
    base = next((x for x in j["impls"] if x["name"] == "baseline"), None)
    for x in j["impls"]:
        t = x["timing"]
        sp = base["timing"]["layer_median_ms"] / t["layer_median_ms"] if base else float("nan")
        print(f"{j['shape']['name']:18s} {j['tokens_per_rank']:6d} {j['routing']['kind']:8s} {x['name']:18s} {t['layer_median_ms']:8.3f} "
              f"{t['tflops']:8.1f} {t['nvlink_gbps']:8.1f} {sp:7.2f} {'ok' if x['check']['passed'] else 'FAIL'} {x['check']['rel_l2']:.1e}")
PY
[ -s "$OUT/$result" ] && rm -rf "$OUT/runs"
# The grouped GEMMs alone in PyTorch (torch._grouped_mm), same shapes, for the GEMM-efficiency context.
if [ "${TORCH:-1}" != 0 ]; then
  PYTHONUNBUFFERED=1 timeout ${TORCH_TIMEOUT:-90} python3 bench/moe/moe_grouped_mm.py --out "$OUT/moe_grouped_mm.json" \
    > "$OUT/moe_grouped_mm.txt" 2>&1
  echo "torch grouped_mm rc=$?" >> "$OUT/moe_device.txt"
  cat "$OUT/moe_grouped_mm.txt" | tail -8
fi
[ -f "$OUT/moe_gpu_tests.txt" ] && grep -E "^\[moe|^\[  (PASSED|FAILED) |tests? (ran|skipped)|^\[  FAILED" "$OUT/moe_gpu_tests.txt" | tail -24
grep -E "rc=|error|failed" "$OUT/moe_device.txt" | tail -16
