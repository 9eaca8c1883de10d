#!/usr/bin/env python3
"""Headline figures as the median over every committed run of a machine (the headline rule of docs/results.md).

Each RUN folder holds the files of one same-process peer round (bench/attn/peers_device.sh): attn/attn_forward.json,
attn_fp8/attn_fp8.json, python/moe_vs_torch.json, python/wan_e2e.json; a run may lack some of them. Per point (a
shape, an 8-bit size, a MoE shape and precision) the median of the runs' same-process ratios, then the headline over
the points: geomean and min of the medians for the bf16 grid, the per-M medians for the 8-bit peers, the range for
the MoE, the median forward time per backend for the Wan forward. Every run's revision and device are listed.

    python3 bench/common/headline_medians.py results/h100 results/h100/run2 results/h100/run3 [--json OUT]
"""
import argparse
import json
import math
import pathlib
import statistics
import sys


def load(run, rel):
    p = pathlib.Path(run) / rel
    if not p.is_file():
        return None
    try:
        with open(p) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"headline_medians: {p}: not a readable JSON file ({e})")


def shape_key(s):
    return f"{s.get('batch', 1)}x{s['seq']}x{s['heads']}x{s['head_dim']}"


def median_by_key(rows):
    """rows: (key, value) over runs -> {key: (median, n runs)}, keys in first-seen order."""
    out = {}
    for k, v in rows:
        if v is not None and math.isfinite(v):
            out.setdefault(k, []).append(v)
    return {k: (statistics.median(v), len(v)) for k, v in out.items()}


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def attention_bf16(runs):
    fa4, cudnn = [], []
    for r in runs:
        j = load(r, "attn/attn_forward.json")
        for p in (j or {}).get("points", []):
            k = shape_key(p["shape"])
            fa4.append((k, p.get("ratio_vs_fa4")))
            cudnn.append((k, p.get("ratio_vs_cudnn")))
    fa4, cudnn = median_by_key(fa4), median_by_key(cudnn)
    out = {}
    for d in (128, 64):
        ks = [k for k in fa4 if k.endswith(f"x{d}")]
        f = [fa4[k][0] for k in ks]
        c = [cudnn[k][0] for k in ks if k in cudnn]
        big = [fa4[k][0] for k in ks if int(k.split("x")[1]) >= 8192]
        out[f"d{d}"] = {
            "points": len(ks), "runs_per_point": sorted({fa4[k][1] for k in ks}),
            "ours_vs_fa4_geomean": geomean(f), "ours_vs_fa4_min": min(f, default=None),
            "ours_vs_fa4_min_at_m_ge_8192": min(big, default=None),
            "ours_vs_cudnn_geomean": geomean(c), "ours_vs_cudnn_min": min(c, default=None),
            "per_point": {k: {"ours_vs_fa4": fa4[k][0], "ours_vs_cudnn": cudnn.get(k, (None,))[0]} for k in ks},
        }
    return out


FP8_PEERS = ("cudnn_fp8", "cudnn_fp8_e2e", "sage2", "xstage_bf16", "fa4", "cudnn")


def attention_fp8(runs):
    rows = {peer: [] for peer in FP8_PEERS}
    for r in runs:
        j = load(r, "attn_fp8/attn_fp8.json")
        for p in (j or {}).get("points", []):
            for peer in FP8_PEERS:
                rows[peer].append((p["shape"]["seq"], p.get(f"fp8_speedup_vs_{peer}")))
    return {f"ours_fp8_vs_{peer}": {str(m): v[0] for m, v in median_by_key(rows[peer]).items()} for peer in FP8_PEERS}


def moe(runs):
    rows = []
    for r in runs:
        j = load(r, "python/moe_vs_torch.json")
        for x in (j or {}).get("results", []):
            rows.append((f"{x['shape']}/{x['precision']}", x.get("speedup")))
    med = median_by_key(rows)
    out = {}
    for prec in ("bf16", "fp8"):
        v = {k.split("/")[0]: m for k, (m, _) in med.items() if k.endswith("/" + prec)}
        out[prec] = {"min": min(v.values(), default=None), "max": max(v.values(), default=None), "per_shape": v}
    return out


def wan(runs):
    rows = []
    for r in runs:
        j = load(r, "python/wan_e2e.json")
        # A backend whose calls were all served by another kernel (routing "routed" 0) is not a figure of it.
        unrouted = {row.get("impl") for row in (j or {}).get("rows", [])
                    if isinstance(row.get("routing"), dict) and row["routing"].get("routed") == 0}
        for impl, ms in ((j or {}).get("summary", {}).get("median_ms") or {}).items():
            if impl not in unrouted:
                rows.append((impl, ms))
    return {k: m for k, (m, _) in median_by_key(rows).items()}


def provenance(runs):
    out = []
    for r in runs:
        for rel in ("attn/attn_forward.json", "attn_fp8/attn_fp8.json", "python/moe_vs_torch.json",
                    "python/wan_e2e.json"):
            j = load(r, rel)
            if j:
                p = j.get("provenance", {})
                out.append({"file": str(pathlib.Path(r) / rel), "git_revision": p.get("git_revision"),
                            "device": p.get("device_name") or p.get("device"), "date_utc": p.get("date_utc")})
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="run folders (each with attn/, attn_fp8/, python/)")
    ap.add_argument("--json", help="write the medians here (refused if it exists)")
    args = ap.parse_args(argv)
    for r in args.runs:
        if not pathlib.Path(r).is_dir():
            sys.exit(f"headline_medians: run folder {r!r} does not exist")
    if args.json and pathlib.Path(args.json).exists():
        sys.exit(f"headline_medians: --json {args.json!r} exists; remove it first")
    result = {"schema": "xstage.headline_medians", "version": 1, "runs": args.runs, "files": provenance(args.runs),
              "attention_bf16": attention_bf16(args.runs), "attention_fp8": attention_fp8(args.runs),
              "moe_vs_torch": moe(args.runs), "wan_e2e_median_ms": wan(args.runs)}
    text = json.dumps(result, indent=1)
    if args.json:
        pathlib.Path(args.json).write_text(text + "\n")
    a = result["attention_bf16"]
    for d in ("d128", "d64"):
        x = a[d]
        if x["points"]:
            print(f"bf16 {d}: {x['points']} points, runs per point {x['runs_per_point']}: ours/FA4 geomean "
                  f"{x['ours_vs_fa4_geomean']:.3f} min {x['ours_vs_fa4_min']:.3f} (M >= 8192: "
                  f"{x['ours_vs_fa4_min_at_m_ge_8192']:.3f}); ours/cuDNN geomean {x['ours_vs_cudnn_geomean']:.3f} "
                  f"min {x['ours_vs_cudnn_min']:.3f}")
    for k, v in result["attention_fp8"].items():
        if v:
            print(f"{k}: " + ", ".join(f"{m}: {r:.3f}" for m, r in v.items()))
    for prec, v in result["moe_vs_torch"].items():
        if v["per_shape"]:
            print(f"FusedMoE vs torch {prec}: {v['min']:.2f}-{v['max']:.2f}x over {len(v['per_shape'])} shapes")
    if result["wan_e2e_median_ms"]:
        print("Wan forward median ms: " + ", ".join(f"{k} {v:.1f}" for k, v in result["wan_e2e_median_ms"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
