#!/usr/bin/env bash
# On the GPU machine (two GPUs), from the repository root with the build folder carried from the development
# machine: the fused MoE configuration matrix, expert-wave vs interleaved schedule (and the bench's predicted
# choice, when it writes one). One `xstage moe bench --impl fused --schedule both` process per
# (shape, tokens per rank, routing), plus `--impl both` runs for shapes that have no baseline figure yet;
# each run's JSON lands in $OUT/matrix/run_<i>.json, the plan and every run's status in
# $OUT/matrix/manifest.tsv, then bench/moe/moe_matrix_merge.py writes $OUT/moe_matrix.{json,md,png}.
#   BUILD=build-moe bench/moe/moe_matrix.sh
# Knobs (environment): SHAPES, TOKENS ("1024 8192"), BASELINE_SHAPES (empty: none), BASELINE_TOKENS (8192),
# PRECISION (bf16 or fp8; fp8 results are named moe_matrix_fp8.*),
# GPUS (0,1), ITERS (20), WARMUP (2), CHECK_TOKENS (2), RUN_TIMEOUT (90 s per run), MATRIX_BUDGET_S (300):
# once that much wall time is spent no further run starts (the rest are logged as skipped), so the whole
# script takes at most MATRIX_BUDGET_S + RUN_TIMEOUT plus the merge.
set -uo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
source "$here/../common/device_env.sh"
SHAPES=${SHAPES:-$MOE_BUILTIN_SHAPES}
TOKENS=${TOKENS:-"1024 8192"}
# Shapes not in results/h200-x2/moe/moe_wave.json: one fused-vs-baseline run each, so that figure exists for all.
BASELINE_SHAPES=${BASELINE_SHAPES-"deepseek-v4-flash deepseek-v4-pro glm-4.5 mimo-v2-flash"}
BASELINE_TOKENS=${BASELINE_TOKENS:-8192}
GPUS=${GPUS:-0,1}
ITERS=${ITERS:-20}
WARMUP=${WARMUP:-2}
CHECK_TOKENS=${CHECK_TOKENS:-2}
RUN_TIMEOUT=${RUN_TIMEOUT:-90}
MATRIX_BUDGET_S=${MATRIX_BUDGET_S:-300}
PRECISION=${PRECISION:-bf16}
case $PRECISION in
  bf16) name=moe_matrix ;;
  fp8) name=moe_matrix_fp8 ;;
  *) echo "moe_matrix: PRECISION must be bf16 or fp8, got '$PRECISION'" >&2; exit 2 ;;
esac

if [ ! -x "$BUILD/xstage" ]; then
  echo "moe_matrix: $BUILD/xstage not found (set BUILD to the carried build folder)" >&2
  exit 2
fi
dir=$OUT/matrix
log=$OUT/${name}_log.txt
manifest=$dir/manifest.tsv
mkdir -p "$dir"
rm -f "$dir"/run_*.json "$manifest"  # results of an earlier invocation would be merged with this plan's

# Plan, most wanted first, so a budget cut drops the least wanted: T = BASELINE_TOKENS of every shape
# (balanced and skewed), then the other token counts. Entry: shape tokens routing impl. A shape of
# BASELINE_SHAPES times the baseline beside both orders in its balanced run at BASELINE_TOKENS (--impl both);
# a shape of BASELINE_SHAPES outside SHAPES gets that run alone.
plan=()
wants_baseline() { [[ " $BASELINE_SHAPES " == *" $1 "* ]]; }
add_fused_runs() {
  local s r impl
  for s in $SHAPES; do
    for r in balanced skewed; do
      impl=fused
      [ "$1" = "$BASELINE_TOKENS" ] && [ "$r" = balanced ] && wants_baseline "$s" && impl=both
      plan+=("$s $1 $r $impl")
    done
  done
}
for t in $TOKENS; do [ "$t" = "$BASELINE_TOKENS" ] && add_fused_runs "$t"; done
for s in $BASELINE_SHAPES; do
  [[ " $SHAPES " == *" $s "* && " $TOKENS " == *" $BASELINE_TOKENS "* ]] || plan+=("$s $BASELINE_TOKENS balanced both")
done
for t in $TOKENS; do [ "$t" != "$BASELINE_TOKENS" ] && add_fused_runs "$t"; done
n=${#plan[@]}

{
  echo "== $(date -u +%FT%TZ) moe_matrix ($PRECISION): $n runs, budget $MATRIX_BUDGET_S s, $RUN_TIMEOUT s per run"
  nvidia-smi -L
  nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
  ldd "$BUILD/xstage" | grep -E "nccl|not found"
  cublas_lib  # the libcublas.so.13 the baseline will load (bench/common/device_env.sh)
} > "$log" 2>&1
printf 'index\tshape\ttokens\trouting\timpl\tstatus\trc\tseconds\n' > "$manifest"

start_s=$(date +%s)
i=0
for entry in "${plan[@]}"; do
  i=$((i + 1))
  read -r shape tokens routing impl <<< "$entry"
  elapsed_s=$(( $(date +%s) - start_s ))
  if (( elapsed_s >= MATRIX_BUDGET_S )); then
    echo "[$i/$n] $shape $tokens $routing ($impl): skipped, budget of $MATRIX_BUDGET_S s spent" | tee -a "$log"
    printf '%d\t%s\t%s\t%s\t%s\tskipped\t\t\n' "$i" "$shape" "$tokens" "$routing" "$impl" >> "$manifest"
    continue
  fi
  cmd=("$BUILD/xstage" moe bench --gpus "$GPUS" --shape "$shape" --tokens "$tokens" --routing "$routing"
       --precision "$PRECISION" --impl "$impl" --schedule both --iters "$ITERS" --warmup "$WARMUP"
       --check-tokens "$CHECK_TOKENS" --out "$dir/run_$i.json")
  echo "== run $i: ${cmd[*]}" >> "$log"
  t0=$(date +%s.%N)
  timeout "$RUN_TIMEOUT" "${cmd[@]}" >> "$log" 2>&1
  rc=$?
  seconds=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  case $rc in
    0) status=ok ;;
    124|137) status=timeout ;;
    *) status=failed ;;  # the bench writes its JSON before failing on a check, so the file may exist
  esac
  echo "[$i/$n] $shape $tokens $routing ($impl): $status rc=$rc, $seconds s" | tee -a "$log"
  printf '%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n' "$i" "$shape" "$tokens" "$routing" "$impl" "$status" "$rc" "$seconds" \
    >> "$manifest"
done
{
  echo "== $(date -u +%FT%TZ) runs done after $(( $(date +%s) - start_s )) s"
  nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
} >> "$log" 2>&1

python3 "$here/moe_matrix_merge.py" "$OUT" "$OUT/$name.json" "$OUT/$name.md" "$OUT/$name.png" \
  2>&1 | tee -a "$log"
echo "merge rc=${PIPESTATUS[0]}" | tee -a "$log"
[ -s "$OUT/$name.md" ] && cat "$OUT/$name.md"
