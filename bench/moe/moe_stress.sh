#!/usr/bin/env bash
# On the GPU machine: liveness of the fused MoE layer under many launches. For each built-in shape ×
# precision × routing, one process runs `xstage moe bench --impl fused --schedule both` with ITERS timed
# runs of each order (wave and interleaved alternate), each launch guarded by the kernel's bounded waits:
# a hang fails its process after --timeout-s with the wait that fired (rank, block, thread, what it waited
# for). Speed is not the point here (long runs heat the GPU); use moe_ab.sh or moe_device.sh for that.
#   BUILD=build GIT_REV=$(git rev-parse --short HEAD) GPUS=0 bench/moe/moe_stress.sh
# Knobs: SHAPES, PRECISIONS, ROUTINGS, TOKENS, ITERS, GPUS, TIMEOUT_S (per wait), BUDGET_S (wall seconds for
# the whole script; each run's timeout is cut to what is left, so the merge always runs).
# Writes $OUT/moe_stress.txt (log) and $OUT/moe_stress.json (one row per process: launches, exit code, the
# failure line if any, the fused layers' medians, --schedule auto's prediction and regret, and the run's
# provenance).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../common/device_env.sh"
XSTAGE=${XSTAGE:-$BUILD/xstage}
SHAPES=${SHAPES:-$MOE_BUILTIN_SHAPES}
PRECISIONS=${PRECISIONS:-"fp8 bf16"}
ROUTINGS=${ROUTINGS:-"balanced skewed"}
TOKENS=${TOKENS:-8192}
ITERS=${ITERS:-200}
GPUS=${GPUS:-0}
TIMEOUT_S=${TIMEOUT_S:-10}
BUDGET_S=${BUDGET_S:-500}
[ -x "$XSTAGE" ] || { echo "moe_stress: not an executable: XSTAGE='$XSTAGE'" >&2; exit 2; }
case "$ITERS" in '' | *[!0-9]*) echo "moe_stress: ITERS must be a positive integer, got '$ITERS'" >&2; exit 2 ;; esac
[ "$ITERS" -ge 1 ] || { echo "moe_stress: ITERS must be a positive integer, got '$ITERS'" >&2; exit 2; }
mkdir -p "$OUT/stress"
log="$OUT/moe_stress.txt"
{ echo "== $(date -u +%FT%TZ) $XSTAGE"; nvidia-smi -L; } > "$log" 2>&1
n=0
total=$(( $(echo $SHAPES | wc -w) * $(echo $PRECISIONS | wc -w) * $(echo $ROUTINGS | wc -w) * $(echo $TOKENS | wc -w) ))
for t in $TOKENS; do
  for prec in $PRECISIONS; do
    for routing in $ROUTINGS; do
      for s in $SHAPES; do
        n=$((n + 1))
        base="$OUT/stress/$s.$t.$prec.$routing"
        t0=$(date +%s)
        timeout $(left 300) "$XSTAGE" moe bench --gpus "$GPUS" --shape "$s" --tokens "$t" --precision "$prec" \
          --routing "$routing" --impl fused --schedule both --iters "$ITERS" --warmup 2 --check-tokens 1 --seed "$n" \
          --timeout-s "$TIMEOUT_S" --out "$base.json" > "$base.log" 2>&1
        rc=$?
        echo "$rc $(( $(date +%s) - t0 ))" > "$base.rc"
        echo "[$n/$total] $s T=$t $prec $routing: rc=$rc, $(( $(date +%s) - t0 )) s" | tee -a "$log"
        grep -E "failed|timed out|did not finish" "$base.log" | tee -a "$log"
      done
    done
  done
done
python3 - "$OUT" "$XSTAGE" "${GIT_REV:-unknown}" "$ITERS" <<'PY'
import glob, json, os, subprocess, sys
out, xstage, rev, iters = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rows = []
for f in sorted(glob.glob(os.path.join(out, "stress", "*.rc"))):
    stem = f[:-3]
    parts = os.path.basename(stem).split(".")  # shape.tokens.precision.routing; shapes may hold dots
    shape, tokens, prec, routing = ".".join(parts[:-3]), int(parts[-3]), parts[-2], parts[-1]
    rc, wall = (int(x) for x in open(f).read().split())
    logtext = open(stem + ".log", errors="replace").read().splitlines()
    fail = [l for l in logtext if "failed" in l or "timed out" in l or "did not finish" in l]
    r = {"shape": shape, "tokens_per_rank": tokens, "precision": prec, "routing": routing, "exit_code": rc,
         "wall_s": wall, "launches_per_order": iters + 2, "failure": fail[-1] if fail else None}
    try:
        j = json.load(open(stem + ".json"))
        r["check_passed"] = all(x["check"]["passed"] for x in j["impls"])
        r["layer_median_ms"] = {x["name"]: x["timing"]["layer_median_ms"] for x in j["impls"]}
        pred = j.get("schedule_prediction") or {}
        r["auto_choice"], r["predicted_speedup"] = pred.get("choice"), pred.get("predicted_speedup")
        r["auto_regret"] = j.get("auto_regret")  # auto's order over the better measured one, minus 1
        r["provenance"] = j.get("provenance")
    except Exception:
        r["check_passed"] = None
    rows.append(r)
def sh(*a):
    try: return subprocess.run(a, capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception as e: return repr(e)
ok = sum(1 for r in rows if r["exit_code"] == 0 and r["check_passed"])
json.dump({"schema": "xstage.moe_stress", "version": 1,
           "what": "liveness of the fused MoE layer: one process per configuration, both orders alternating, "
                   "launches_per_order launches of each; exit_code 0 and check_passed: every launch finished and "
                   "the sampled tokens matched the CPU reference",
           "binary": xstage, "git_revision": rev, "command": " ".join(sys.argv),
           "nvidia_smi": sh("nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm", "--format=csv,noheader"),
           "passed": ok, "configurations": len(rows), "rows": rows},
          open(os.path.join(out, "moe_stress.json"), "w"), indent=1)
print(f"moe_stress: {ok} of {len(rows)} configurations passed")
for r in rows:
    if r["failure"] or r["exit_code"] != 0: print("  failed:", r["shape"], r["tokens_per_rank"], r["precision"], r["routing"], r["failure"])
PY
