#!/usr/bin/env python3
"""Compares builds of the attention kernel (tuning variants) with each other, with FlashAttention-4's
Hopper forward and with cuDNN SDPA, in one process.

Each variant is an `xstage` binary; per shape the variants and the peers run in order and then in
reverse order (so clock drift from heating affects all alike), each after a warm-up of at least
--warmup-s seconds of back-to-back launches; the mean of both passes is shown, with the SM clock and
power sampled during each timed loop (provenance.PowerSampler, bench/common).
Usage: attn_tune.py --json OUT [--shapes 8192x3,65536x5,16384x12x64] name=path/to/xstage[:fp8] [name=path ...]
(a shape is SEQxHEADS, head_dim 128, or SEQxHEADSxHEAD_DIM)
(a variant's ":fp8" runs it with --precision fp8, the peers staying bf16; ":whole" runs the bf16 kernel with
--tail whole, every tile on one SM)
"""
import argparse
import json
import math
import statistics
import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import attn_vs_cudnn as avc  # noqa: E402

SHAPES = [(8192, 3, 128), (16384, 5, 128), (8192, 12, 128), (32768, 12, 128), (65536, 3, 128)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=6)
    ap.add_argument("--warmup-s", type=float, default=0.3)
    ap.add_argument("--check-rows", type=int, default=8)
    ap.add_argument("--shapes", default=None,
                    help="comma-separated SEQxHEADS or SEQxHEADSxHEAD_DIM (default: the built-in list, head_dim 128)")
    ap.add_argument("--no-peers", action="store_true", help="variants only (no FA4, no cuDNN)")
    ap.add_argument("variants", nargs="+")
    args = ap.parse_args()
    variants = [v.split("=", 1) for v in args.variants]
    suffixes = {n: (p.rsplit(":", 1)[1] if ":" in p else None) for n, p in variants}
    for n, x in suffixes.items():
        if x not in (None, "fp8", "whole"):
            ap.error(f"variant {n}: suffix ':{x}' (accepted: :fp8, :whole)")
    precisions = {n: ("fp8" if x == "fp8" else None) for n, x in suffixes.items()}
    tails = {n: ("whole" if x == "whole" else None) for n, x in suffixes.items()}
    variants = [(n, p.rsplit(":", 1)[0] if ":" in p else p) for n, p in variants]
    shapes = SHAPES
    if args.shapes:
        shapes = []
        for text in args.shapes.split(","):
            try:
                t = tuple(int(x) for x in text.split("x"))
            except ValueError:
                t = ()
            if len(t) == 2:
                t = t + (128,)
            if len(t) != 3 or t[0] < 1 or t[1] < 1 or t[2] not in (64, 128):
                ap.error(f"--shapes: '{text}' (SEQxHEADS or SEQxHEADSxHEAD_DIM; head_dim 64 or 128)")
            shapes.append(t)
    prov = avc.provenance(avc.torch)  # before any timing: the start clock
    avc.SAMPLER = avc.PowerSampler()
    fa4_call, fa4_info = (None, {"available": False, "error": "--no-peers"}) if args.no_peers else avc.load_fa4()
    peers = [] if args.no_peers else (["fa4"] if fa4_call else []) + ["cudnn"]
    out = []
    for s, h, d in shapes:
        warmup = max(args.warmup, math.ceil(args.warmup_s * 800e12 / avc.flops(1, s, h, d)))
        names = [n for n, _ in variants] + peers
        paths = dict(variants)
        runs = {n: [] for n in names}
        for order in (names, names[::-1]):
            for name in order:
                if name == "fa4":
                    r = avc.time_torch(fa4_call, 1, s, h, d, args.iters, warmup, bshd=True)
                elif name == "cudnn":
                    r = avc.time_sdpa(avc.SDPBackend.CUDNN_ATTENTION, 1, s, h, d, args.iters, warmup)
                else:
                    r = avc.run_ours(paths[name], 1, s, h, d, args.iters, warmup, args.check_rows,
                                     precision=precisions[name], tail=tails[name])
                    if "timing" in r:
                        r = dict(r["timing"], check=r["check"]["passed"], power=r.get("power", {}))
                    else:
                        r = {"error": r.get("error"), "check": False}
                runs[name].append(r)
        row = {"seq": s, "heads": h, "head_dim": d, "warmup_launches": warmup, "impls": {}}
        for name in names:
            ok = [r for r in runs[name] if "tflops" in r]
            row["impls"][name] = {
                "tflops": statistics.mean(r["tflops"] for r in ok) if len(ok) == len(runs[name]) else None,
                "per_pass_tflops": [r.get("tflops") for r in runs[name]],
                "check": all(r.get("check", True) for r in runs[name]),
                "sm_clock_mhz": [r.get("power", {}).get("sm_clock_mhz_median") for r in runs[name]],
                "power_w": [r.get("power", {}).get("power_w_median") for r in runs[name]],
                "samples_ms": [r.get("samples_ms") for r in runs[name]]}
        out.append(row)
        print(f"seq {s:6d} h {h:2d} d {d:3d} | " + "  ".join(
            f"{n} {row['impls'][n]['tflops'] or float('nan'):6.1f}"
            f"@{statistics.mean([c for c in row['impls'][n]['sm_clock_mhz'] if c] or [float('nan')]):.0f}MHz"
            f"{'' if row['impls'][n]['check'] else ' FAIL'}" for n in names), flush=True)
    avc.SAMPLER.stop()
    with open(args.json, "w") as f:
        json.dump({"schema": "xstage.attn_tune", "version": 4, "command": " ".join(sys.argv), "fa4": fa4_info,
                   "provenance": {**prov, "variants": dict(variants), "precisions": precisions, "tails": tails},
                   "method": "per shape: variants and peers in order, then reversed; warm-up >= warmup_s of "
                             "back-to-back launches before each timed loop; mean of both passes' medians",
                   "shapes": out}, f, indent=1)


if __name__ == "__main__":
    main()
