#!/usr/bin/env python3
"""Compares builds of the attention kernel (tuning variants) with each other and with cuDNN SDPA.

Each variant is an `xstage` binary; per shape the variants run in order and then in reverse order (so
clock drift from heating affects all alike), with cuDNN in between; the mean of both passes is shown.
Usage: attn_tune.py --json OUT name=path/to/xstage [name=path ...]
"""
import argparse
import json
import statistics
import subprocess
import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from attn_vs_cudnn import SDPBackend, run_ours, time_sdpa  # noqa: E402

SHAPES = [(8192, 3), (16384, 5), (8192, 12), (32768, 12), (65536, 3)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=6)
    ap.add_argument("variants", nargs="+")
    args = ap.parse_args()
    variants = [v.split("=", 1) for v in args.variants]
    out = []
    for s, h in SHAPES:
        runs = {name: [] for name, _ in variants}
        checks = {name: True for name, _ in variants}
        cudnn = []
        for order in (variants, list(reversed(variants))):
            for name, path in order:
                r = run_ours(path, 1, s, h, 128, args.iters, args.warmup, 8)
                if "timing" not in r:
                    checks[name] = False
                    continue
                runs[name].append(r["timing"]["tflops"])
                checks[name] = checks[name] and r["check"]["passed"]
            cudnn.append(time_sdpa(SDPBackend.CUDNN_ATTENTION, 1, s, h, 128, args.iters, args.warmup)["tflops"])
        row = {"seq": s, "heads": h, "cudnn": statistics.mean(cudnn), "cudnn_runs": cudnn,
               "variants": {n: {"tflops": statistics.mean(v) if v else None, "runs": v, "check": checks[n]}
                            for n, v in runs.items()}}
        out.append(row)
        print(f"seq {s:6d} h {h:2d} cudnn {row['cudnn']:6.1f} | " + "  ".join(
            f"{n} {row['variants'][n]['tflops'] or float('nan'):6.1f}{'' if checks[n] else ' FAIL'}"
            for n, _ in variants), flush=True)
    with open(args.json, "w") as f:
        json.dump({"schema": "xstage.attn_tune", "version": 1, "command": " ".join(sys.argv), "shapes": out}, f,
                  indent=1)


if __name__ == "__main__":
    main()
