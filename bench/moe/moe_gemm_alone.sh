#!/usr/bin/env bash
# On the GPU machine (two GPUs, or one with GPUS=0), from the repository root with the build folder carried from the
# development machine: Linear-1 and Linear-2 alone, the fused kernel's GEMM-only mode
# (`xstage moe bench --impl fused --gemm-alone`, per-rank medians of the fused kernel launch alone) beside
# torch._grouped_mm (bench/moe/moe_grouped_mm.py: bf16, and torch._scaled_grouped_mm for FP8 where torch has
# it) on the same per-GPU shapes: T tokens per rank, balanced routing, the ranks of GPUS (2 unless set); balanced routing gives
# every expert T·k·ranks/E rows (the torch script's rows per expert; the merge checks it against the
# rows each rank received). One JSON, $OUT/moe_gemm_alone.json, with provenance.
#   BUILD=build-ga-dev GIT_REV=$(git rev-parse HEAD) bench/moe/moe_gemm_alone.sh
# Knobs: SHAPES, TOKENS, PRECISIONS, ITERS, WARMUP, SCHEDULE, GPUS, BUDGET_S (wall seconds for the whole script;
# every step's timeout is cut to what is left, so the merge always runs).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../common/device_env.sh"
SHAPES=${SHAPES:-"qwen3-235b-a22b deepseek-v3 dit-moe-g2-16e2a"}
TOKENS=${TOKENS:-8192}
PRECISIONS=${PRECISIONS:-"bf16 fp8"}
ITERS=${ITERS:-10}
WARMUP=${WARMUP:-2}
GPUS=${GPUS:-0,1}  # one GPU (GPUS=0): every row local, no remote store
SCHEDULE=${SCHEDULE:-interleaved}
BUDGET_S=${BUDGET_S:-170}
mkdir -p "$OUT/ga"
log="$OUT/moe_gemm_alone.txt"
{ echo "== $(date -u +%FT%TZ)"; nvidia-smi -L; nvidia-smi --query-gpu=driver_version,clocks.sm,clocks.max.sm --format=csv; } > "$log" 2>&1
for prec in $PRECISIONS; do
  for s in $SHAPES; do
    timeout $(left 45) "$BUILD/xstage" moe bench --gpus "$GPUS" --shape "$s" --tokens "$TOKENS" --routing balanced \
      --precision "$prec" --impl fused --schedule "$SCHEDULE" --gemm-alone --iters "$ITERS" --warmup "$WARMUP" \
      --check-tokens 1 --seed 1 --out "$OUT/ga/$s.$prec.json" >> "$log" 2>&1
    echo "xstage $s $prec rc=$?" >> "$log"
  done
  if [ "$prec" = bf16 ]; then  # torch after the bf16 runs: its numbers come back even if fp8 runs out of time
    PYTHONUNBUFFERED=1 timeout $(left 60) python3 bench/moe/moe_grouped_mm.py --ranks $(echo "$GPUS" | tr , "\n" | wc -l) --tokens $TOKENS --shapes $SHAPES \
      $([[ " $PRECISIONS " == *" fp8 "* ]] && echo --fp8) --out "$OUT/ga/torch.json" >> "$log" 2>&1
    echo "torch rc=$?" >> "$log"
  fi
done
python3 - "$OUT" "${GIT_REV:-unknown}" "$TOKENS" <<'PY'
import glob, json, os, subprocess, sys
out, rev, tokens = sys.argv[1], sys.argv[2], int(sys.argv[3])
ours = {}
for f in glob.glob(os.path.join(out, "ga", "*.json")):
    if not f.endswith("torch.json"):
        j = json.load(open(f)); ours[(j["shape"]["name"], j["precision"])] = j
torch_res = {}
tj = None
if os.path.exists(os.path.join(out, "ga", "torch.json")):
    tj = json.load(open(os.path.join(out, "ga", "torch.json")))
    torch_res = {r["shape"]: r for r in tj["results"]}
rows = []
for (shape, prec), j in sorted(ours.items()):
    for g in j.get("gemm_alone", []):
        t = torch_res.get(shape, {})
        el = j["shape"]["experts"] // j["ranks"]
        sfx = "" if prec == "bf16" else "_fp8"
        r = {"shape": shape, "precision": prec, "tokens_per_rank": j["tokens_per_rank"], "schedule": g["schedule"],
             "rows_per_rank": g["rows_per_rank"], "padded_rows_per_rank": g["padded_rows_per_rank"],
             "check_passed": all(x["check"]["passed"] for x in j["impls"]),
             "fused": {k: g[k] for k in ("linear1_ms", "linear1_tflops", "linear1_padded_tflops", "linear2_ms",
                                         "linear2_tflops", "linear2_padded_tflops", "linear1", "linear2")},
             "fused_layer_median_ms": j["impls"][0]["timing"]["layer_median_ms"]}
        if t:
            same = t.get("rows_per_expert") is not None and el and all(
                n == t["rows_per_expert"] * el for n in g["rows_per_rank"])
            r["torch_rows_match"] = bool(same)
            tt = {k: t.get(k.replace("_", sfx + "_", 1)) for k in ("linear1_ms", "linear1_tflops", "linear2_ms", "linear2_tflops")}
            if tt["linear1_ms"] is None:
                r["torch"] = {"missing": t.get("linear1_fp8_error", t.get("error", "not measured"))}
            else:
                r["torch"] = dict(tt, op=t.get("fp8_op", "torch._grouped_mm, bf16") if sfx else "torch._grouped_mm, bf16",
                                  rows_per_expert=t["rows_per_expert"])
                r["fused_over_torch"] = {"linear1": g["linear1_tflops"] / tt["linear1_tflops"],
                                         "linear2": g["linear2_tflops"] / tt["linear2_tflops"]}
        rows.append(r)
def sh(*a):
    try: return subprocess.run(a, capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception as e: return repr(e)
prov = {"git_revision": rev, "nvidia_smi": sh("nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm", "--format=csv,noheader"),
        "torch": tj["torch"] if tj else None, "torch_device": tj["device"] if tj else None,
        "xstage_provenance": next(iter(ours.values()))["provenance"] if ours else None}
res = {"schema": "xstage.moe_gemm_alone", "version": 1,
       "what": "Linear-1 (+SwiGLU epilogue) and Linear-2 tiles of the fused MoE kernel alone (GEMM-only mode, fused kernel "
               "launch timed alone, per-rank median, slower rank shown) vs torch grouped GEMMs on one GPU with the same rows per "
               "local expert (balanced routing, 2 ranks). TFLOP/s from real rows; padded_* from rows padded to 128-row blocks.",
       "rows": rows, "provenance": prov}
json.dump(res, open(os.path.join(out, "moe_gemm_alone.json"), "w"), indent=1)
print(f"{'shape':18s} {'prec':5s} {'L1 ours':>8s} {'L1 torch':>8s} {'L2 ours':>8s} {'L2 torch':>8s}  TFLOP/s (slower rank)")
for r in rows:
    t = r.get("torch", {})
    print(f"{r['shape']:18s} {r['precision']:5s} {r['fused']['linear1_tflops']:8.1f} {t.get('linear1_tflops') or float('nan'):8.1f} "
          f"{r['fused']['linear2_tflops']:8.1f} {t.get('linear2_tflops') or float('nan'):8.1f}")
PY
grep -E "rc=|rror|FAIL" "$log" | tail -20
