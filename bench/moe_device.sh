#!/usr/bin/env bash
# On the GPU machine (two or more GPUs), from the repository root with the build folder carried from the
# development machine: the MoE baseline's GPU tests, then `xstage moe bench` over a few shapes and token
# counts, merged into $OUT/moe_baseline.json; a short table last.
#   BUILD=build-moe bench/moe_device.sh
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
BUILD=${BUILD:-build}
# The NCCL library matching the headers (2.28.9): PyTorch's, first. cuBLAS 13: the toolkit's, else the wheel's.
nccl_lib=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"lib"))' 2>/dev/null)
[ -n "$nccl_lib" ] && export LD_LIBRARY_PATH=$nccl_lib:${LD_LIBRARY_PATH:-}
for d in /usr/local/cuda/lib64 $(python3 -c 'import nvidia,os;p=list(nvidia.__path__)[0];print(os.path.join(p,"cu13","lib"),os.path.join(p,"cublas","lib"))' 2>/dev/null); do
  [ -d "$d" ] && export LD_LIBRARY_PATH=${LD_LIBRARY_PATH}:$d
done
OUT=${OUT:-/tmp/xstage_out}
mkdir -p "$OUT/runs"
{
  echo "== $(date -u +%FT%TZ)"; nvidia-smi -L
  nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
  ldd "$BUILD/xstage" | grep -E "cublas|nccl|not found"
} > "$OUT/moe_device.txt" 2>&1
timeout ${TEST_TIMEOUT:-150} "$BUILD/tests/xstage_gpu_tests" --gtest_filter='Routings/MoeBaselineTest.*' > "$OUT/moe_gpu_tests.txt" 2>&1
echo "gpu tests rc=$?" >> "$OUT/moe_device.txt"
# shape tokens routing check-tokens
runs=(
  "qwen3-235b-a22b 1024 balanced 4" "qwen3-235b-a22b 8192 balanced 2" "qwen3-235b-a22b 8192 skewed 2"
  "deepseek-v3 1024 balanced 2" "deepseek-v3 8192 balanced 2" "deepseek-v3 8192 skewed 2"
  "dit-moe-g2-16e2a 1024 balanced 4" "dit-moe-g2-16e2a 8192 balanced 2"
)
i=0
for r in "${runs[@]}"; do
  set -- $r
  i=$((i + 1))
  timeout ${RUN_TIMEOUT:-60} "$BUILD/xstage" moe bench --gpus 0,1 --shape "$1" --tokens "$2" --routing "$3" \
    --check-tokens "$4" --precision bf16 --impl baseline --iters ${ITERS:-30} --warmup 5 \
    --out "$OUT/runs/run_$i.json" >> "$OUT/moe_device.txt" 2>&1
  echo "run $i ($r) rc=$?" >> "$OUT/moe_device.txt"
done
python3 - "$OUT" <<'PY'
import json, glob, os, sys
out = sys.argv[1]
runs = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(out, "runs", "run_*.json")), key=lambda f: int(f.split("_")[-1][:-5]))]
json.dump({"schema": "xstage.moe_bench_set", "version": 1, "runs": runs}, open(os.path.join(out, "moe_baseline.json"), "w"), indent=1)
print(f"{'shape':18s} {'T':>5s} {'routing':8s} {'gemm':22s} {'layer ms':>9s} {'TFLOP/s':>8s} {'disp':>7s} {'L1':>7s} {'swiglu':>7s} {'L2':>7s} {'comb':>7s} check")
for j in runs:
    s = j["timing"]["stage_median_ms_slowest_rank"]
    print(f"{j['shape']['name']:18s} {j['tokens_per_rank']:5d} {j['routing']['kind']:8s} {j['gemm']:22s} {j['timing']['layer_median_ms']:9.3f} "
          f"{j['timing']['tflops']:8.1f} {s['dispatch']:7.3f} {s['linear1']:7.3f} {s['swiglu']:7.3f} {s['linear2']:7.3f} {s['combine']:7.3f} "
          f"{'ok' if j['check']['passed'] else 'FAIL'} {j['check']['rel_l2']:.1e}")
PY
[ -s "$OUT/moe_baseline.json" ] && rm -rf "$OUT/runs"
grep -E "^\[moe\]|^\[  (PASSED|FAILED) |tests? (ran|skipped)|^\[  FAILED" "$OUT/moe_gpu_tests.txt" | tail -12
grep -E "rc=|error|failed" "$OUT/moe_device.txt" | tail -12
