#!/usr/bin/env bash
# On the GPU machine (two GPUs, or one with GPUS=0): two builds of xstage side by side in one script, on the same machine, in
# alternating order (A B B A ...): the fused MoE kernel's GEMMs alone (`--gemm-alone`) and/or the whole
# layer (`--impl both --schedule both`: separate-kernel baseline, fused wave, fused interleaved).
# For a kernel change: A = the build before it, B = the build with it. One JSON, $OUT/moe_ab.json; its
# figure (B over A per shape, precision and order): bench/moe/plot_moe_ab.py moe_ab.json moe_ab.png.
#   A=build-dev/xstage_prev B=build-dev/xstage GIT_REV_A=... GIT_REV_B=... bench/moe/moe_ab.sh
# Knobs: SHAPES, TOKENS, PRECISIONS, MODES ("gemm layer"), ROUTING, ITERS, WARMUP, GPUS, BUDGET_S (wall seconds
# for the whole script; each run's timeout is cut to what is left, so the merge always runs).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../common/device_env.sh"
A=${A:?A: path of the first xstage binary}
B=${B:?B: path of the second xstage binary}
SHAPES=${SHAPES:-"qwen3-235b-a22b deepseek-v3 dit-moe-g2-16e2a"}
TOKENS=${TOKENS:-8192}
PRECISIONS=${PRECISIONS:-"bf16 fp8"}
MODES=${MODES:-"gemm layer"}
ROUTING=${ROUTING:-balanced}
ITERS=${ITERS:-10}
WARMUP=${WARMUP:-2}
GPUS=${GPUS:-0,1}  # one GPU (GPUS=0): every row local, no remote store
BUDGET_S=${BUDGET_S:-300}
for v in "$A" "$B"; do [ -x "$v" ] || { echo "moe_ab: not an executable: '$v'" >&2; exit 2; }; done
mkdir -p "$OUT/ab"
log="$OUT/moe_ab.txt"
{ echo "== $(date -u +%FT%TZ)"; nvidia-smi -L; nvidia-smi --query-gpu=driver_version,clocks.sm,clocks.max.sm --format=csv; } > "$log" 2>&1
n=0
for mode in $MODES; do
  for prec in $PRECISIONS; do
    for t in $TOKENS; do
      for s in $SHAPES; do
        n=$((n + 1))
        order="A B"; [ $((n % 2)) -eq 0 ] && order="B A"
        for which in $order; do
          bin=$A; [ $which = B ] && bin=$B
          if [ $mode = gemm ]; then args=(--impl fused --schedule interleaved --gemm-alone); else args=(--impl both --schedule both); fi
          f="$OUT/ab/$mode.$s.$t.$prec.$which.json"
          echo "-- $(date -u +%T) $which $mode $s T=$t $prec" >> "$log"
          timeout $(left 90) "$bin" moe bench --gpus "$GPUS" --shape "$s" --tokens "$t" --routing "$ROUTING" --precision "$prec" \
            "${args[@]}" --iters "$ITERS" --warmup "$WARMUP" --check-tokens 1 --seed 1 --out "$f" >> "$log" 2>&1
          echo "rc=$?" >> "$log"
        done
      done
    done
  done
done
python3 - "$OUT" "${GIT_REV_A:-unknown}" "${GIT_REV_B:-unknown}" "$A" "$B" <<'PY'
import glob, json, os, subprocess, sys
out, rev_a, rev_b, bin_a, bin_b = sys.argv[1:6]
rows = {}
for f in sorted(glob.glob(os.path.join(out, "ab", "*.json"))):
    parts = os.path.basename(f)[:-5].split(".")  # mode.shape.tokens.precision.which; shapes may hold dots
    mode, shape, tokens, prec, which = parts[0], ".".join(parts[1:-3]), parts[-3], parts[-2], parts[-1]
    try: j = json.load(open(f))
    except Exception as e: continue
    rows.setdefault((mode, shape, int(tokens), prec), {})[which] = j
res = []
for (mode, shape, tokens, prec), ab in sorted(rows.items()):
    r = {"mode": mode, "shape": shape, "tokens_per_rank": tokens, "precision": prec}
    for w, j in ab.items():
        d = {"check_passed": all(x["check"]["passed"] for x in j["impls"])}
        if mode == "gemm":
            g = j["gemm_alone"][0]
            d.update({k: g[k] for k in ("linear1_ms", "linear1_tflops", "linear2_ms", "linear2_tflops", "linear1", "linear2")})
        else:
            d["impls"] = {x["name"]: {"layer_median_ms": x["timing"]["layer_median_ms"], "tflops": x["timing"]["tflops"],
                                      "timing": x["timing"]} for x in j["impls"]}
        d["provenance"] = j.get("provenance")
        r[w] = d
    if "A" in r and "B" in r:
        if mode == "gemm":
            r["b_over_a"] = {k: r["B"][k + "_tflops"] / r["A"][k + "_tflops"] for k in ("linear1", "linear2")}
        else:
            r["b_over_a"] = {n: r["A"]["impls"][n]["layer_median_ms"] / r["B"]["impls"][n]["layer_median_ms"]
                             for n in r["B"]["impls"] if n in r["A"]["impls"]}
            base = r["B"]["impls"].get("baseline")
            if base:
                r["b_fused_over_baseline"] = {n: base["layer_median_ms"] / x["layer_median_ms"] for n, x in r["B"]["impls"].items()
                                              if n != "baseline"}
    res.append(r)
def sh(*a):
    try: return subprocess.run(a, capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception as e: return repr(e)
json.dump({"schema": "xstage.moe_ab", "version": 1,
           "what": "two xstage builds side by side, same machine and script, alternating order: fused GEMMs alone (TFLOP/s per GPU, "
                   "slower rank) and whole layers (median ms, slower rank); b_over_a > 1: B faster",
           "a": {"binary": bin_a, "git_revision": rev_a}, "b": {"binary": bin_b, "git_revision": rev_b},
           "command": " ".join(sys.argv), "nvidia_smi": sh("nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm", "--format=csv,noheader"),
           "rows": res}, open(os.path.join(out, "moe_ab.json"), "w"), indent=1)
for r in res:
    if "b_over_a" not in r: print(r["mode"], r["shape"], r["tokens_per_rank"], r["precision"], "incomplete"); continue
    if r["mode"] == "gemm":
        print(f"gemm  {r['shape']:18s} {r['tokens_per_rank']:6d} {r['precision']:5s} L1 {r['A']['linear1_tflops']:6.0f} -> {r['B']['linear1_tflops']:6.0f}"
              f"  L2 {r['A']['linear2_tflops']:6.0f} -> {r['B']['linear2_tflops']:6.0f}")
    else:
        s = "  ".join(f"{n} {r['A']['impls'][n]['layer_median_ms']:.2f}->{r['B']['impls'][n]['layer_median_ms']:.2f}" for n in r["B"]["impls"] if n in r["A"]["impls"])
        print(f"layer {r['shape']:18s} {r['tokens_per_rank']:6d} {r['precision']:5s} {s}  fused/base {r.get('b_fused_over_baseline')}")
PY
grep -E "rc=[^0]|rror|FAIL" "$log" | tail -20
