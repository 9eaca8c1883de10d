#!/usr/bin/env bash
# On the GPU machine (two GPUs, or one with GPUS=0): the interleaved order's lead D swept per shape and
# precision beside the expert-wave order, one binary, one script: for each (shape, precision) the wave
# run and one interleaved run per D of its list, in an order rotated from one configuration to the next.
# One JSON, $OUT/moe_lead.json (median ms per run, interleaved / wave time ratios, provenance of every run).
#   SWEEP="dit-moe-g2-16e2a 4 9
#   qwen3-235b-a22b 8 10" BUILD=build-ab/M GIT_REV=$(git rev-parse HEAD) GPUS=0 TOKENS=16384 bench/moe/moe_lead_sweep.sh
# Knobs: SWEEP (lines "shape D1 D2 ..."), PRECISIONS, TOKENS, ROUTING, ITERS, WARMUP, GPUS, BUDGET_S.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../common/device_env.sh"
SWEEP=${SWEEP:?SWEEP: lines of \"shape D1 D2 ...\"}
PRECISIONS=${PRECISIONS:-"fp8 bf16"}
TOKENS=${TOKENS:-8192}
ROUTING=${ROUTING:-balanced}
ITERS=${ITERS:-10}
WARMUP=${WARMUP:-2}
GPUS=${GPUS:-0,1}
BUDGET_S=${BUDGET_S:-300}
[ -x "$BUILD/xstage" ] || { echo "moe_lead_sweep: not an executable: '$BUILD/xstage'" >&2; exit 2; }
mkdir -p "$OUT/lead"
log="$OUT/moe_lead.txt"
{ echo "== $(date -u +%FT%TZ)"; nvidia-smi -L; nvidia-smi --query-gpu=driver_version,clocks.sm,clocks.max.sm --format=csv; } > "$log" 2>&1
n=0
while read -r shape leads; do
  [ -z "$shape" ] && continue
  for prec in $PRECISIONS; do
    runs=(wave)
    for d in $leads; do runs+=("$d"); done
    n=$((n + 1))
    rot=$((n % ${#runs[@]}))
    for ((i = 0; i < ${#runs[@]}; ++i)); do
      r=${runs[$(((i + rot) % ${#runs[@]}))]}
      if [ "$r" = wave ]; then args=(--schedule wave); else args=(--schedule interleaved --lead-rows "$r"); fi
      echo "-- $(date -u +%T) $shape $prec $r" >> "$log"
      timeout $(left 60) "$BUILD/xstage" moe bench --gpus "$GPUS" --shape "$shape" --tokens "$TOKENS" --routing "$ROUTING" \
        --precision "$prec" --impl fused "${args[@]}" --iters "$ITERS" --warmup "$WARMUP" --check-tokens 1 --seed 1 \
        --out "$OUT/lead/$shape.$prec.$r.json" >> "$log" 2>&1
      echo "rc=$?" >> "$log"
    done
  done
done <<< "$SWEEP"
python3 - "$OUT" "${GIT_REV:-unknown}" <<'PY'
import glob, json, os, sys
out, rev = sys.argv[1:3]
runs = {}
for f in glob.glob(os.path.join(out, "lead", "*.json")):
    parts = os.path.basename(f)[:-5].split(".")  # shape.precision.run; shapes may hold dots
    shape, prec, run = ".".join(parts[:-2]), parts[-2], parts[-1]
    try: j = json.load(open(f))
    except Exception: continue
    x = j["impls"][0]
    runs.setdefault((shape, prec), {})[run] = {
        "layer_median_ms": x["timing"]["layer_median_ms"], "lead_rows": x.get("lead_rows"),
        "check_passed": x["check"]["passed"], "timing": x["timing"], "provenance": j.get("provenance")}
rows = []
for (shape, prec), r in sorted(runs.items()):
    wave = r.get("wave", {}).get("layer_median_ms")
    leads = sorted((int(k), v) for k, v in r.items() if k != "wave")
    rows.append({"shape": shape, "precision": prec, "wave_ms": wave,
                 "interleaved": [{"lead_rows": d, "ms": v["layer_median_ms"],
                                  "interleaved_over_wave_time": v["layer_median_ms"] / wave if wave else None,
                                  "check_passed": v["check_passed"]} for d, v in leads],
                 "runs": r})
    print(f"{shape:18s} {prec:5s} wave {wave or float('nan'):7.3f} ms  " +
          "  ".join(f"D={d} {v['layer_median_ms']:.3f} ({v['layer_median_ms'] / wave:.3f})" for d, v in leads if wave))
json.dump({"schema": "xstage.moe_lead", "version": 1, "git_revision": rev,
           "what": "fused layer, wave order and interleaved order at several leads D, same binary and script; "
                   "median ms of the slower rank; interleaved_over_wave_time < 1: interleaved faster",
           "command": " ".join(sys.argv), "rows": rows}, open(os.path.join(out, "moe_lead.json"), "w"), indent=1)
PY
grep -E "rc=[^0]|rror" "$log" | tail -20
