#!/usr/bin/env bash
# On the GPU machine (one GPU is enough; Firecracker runtimes only: on gVisor ncu cannot read the counters):
# Nsight Compute on the fused MoE kernel, the GEMM phases alone (`--gemm-alone`), so that the counters
# say what holds a Linear-1 or Linear-2 tile back (Tensor-pipe utilization, warp stall reasons, L2 and
# shared-memory throughput). Clocks are left alone (--clock-control none). COUNT launches of the kernel
# per (shape, precision) after SKIP: with `--iters 1 --warmup 1` the first four are layer runs, the next
# two Linear-1-only, then two Linear-2-only (SKIP=4 COUNT=1: the first Linear-1-only launch); the text
# report goes to $OUT/ncu_<shape>_<precision>.txt. About 10-40 s per shape with SKIP=4 COUNT=1 SOURCE=1.
#   BUILD=build-ab/F GPUS=0 TOKENS=16384 SHAPES=deepseek-v3 SKIP=4 COUNT=1 SOURCE=1 bench/moe/moe_ncu.sh
# Knobs: SHAPES, PRECISIONS, TOKENS, GPUS, SKIP (kernel launches skipped first), COUNT (launches profiled),
# SECTIONS, BUDGET_S, SOURCE (1: also warp-stall sampling per SASS instruction: the report is kept as
# $OUT/ncu_<shape>_<precision>.ncu-rep and its source page printed, gzipped, to ...sass.csv.gz).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../common/device_env.sh"
SHAPES=${SHAPES:-"dit-moe-g2-16e2a deepseek-v3"}
PRECISIONS=${PRECISIONS:-"fp8"}
TOKENS=${TOKENS:-16384}
GPUS=${GPUS:-0}
SKIP=${SKIP:-0}
COUNT=${COUNT:-8}
SECTIONS=${SECTIONS:-"SpeedOfLight ComputeWorkloadAnalysis MemoryWorkloadAnalysis WarpStateStats SchedulerStats Occupancy"}
BUDGET_S=${BUDGET_S:-240}
SOURCE=${SOURCE:-0}
[ -x "$BUILD/xstage" ] || { echo "moe_ncu: not an executable: '$BUILD/xstage'" >&2; exit 2; }
command -v ncu > /dev/null || { echo "moe_ncu: ncu is not on the PATH" >&2; exit 2; }
sections=()
for s in $SECTIONS; do sections+=(--section "$s"); done
[ "$SOURCE" = 1 ] && sections+=(--section SourceCounters --section WarpStateStats)
for prec in $PRECISIONS; do
  for s in $SHAPES; do
    out="$OUT/ncu_${s}_${prec}.txt"
    report=()
    [ "$SOURCE" = 1 ] && report=(--export "$OUT/ncu_${s}_${prec}" --force-overwrite)
    echo "-- $(date -u +%T) $s $prec" | tee "$out"
    timeout $(left 120) ncu --clock-control none --target-processes all --kernel-name regex:moe_fused_kernel \
      --launch-skip "$SKIP" --launch-count "$COUNT" "${sections[@]}" "${report[@]}" \
      "$BUILD/xstage" moe bench --gpus "$GPUS" --shape "$s" --tokens "$TOKENS" --routing balanced --precision "$prec" \
      --impl fused --schedule interleaved --gemm-alone --iters 1 --warmup 1 --check-tokens 1 --seed 1 \
      --out "$OUT/ncu_${s}_${prec}.bench.json" >> "$out" 2>&1
    echo "rc=$?" | tee -a "$out"
    if [ "$SOURCE" = 1 ] && [ -f "$OUT/ncu_${s}_${prec}.ncu-rep" ]; then
      ncu --import "$OUT/ncu_${s}_${prec}.ncu-rep" --print-details all >> "$out" 2>&1
      timeout $(left 120) ncu --import "$OUT/ncu_${s}_${prec}.ncu-rep" --page source --csv --print-source sass \
        2>> "$out" | gzip > "$OUT/ncu_${s}_${prec}.sass.csv.gz"
      echo "source page: rc=${PIPESTATUS[0]}" | tee -a "$out"
    fi
  done
done
