#!/usr/bin/env python3
"""Compares two bench JSON results of the same command and --seed from two builds (before and after a change):
the set of keys must be identical everywhere (lists of objects compared element-wise), and every value
under a "check" object, plus shape/routing/flops/rows fields, must be equal. Timing values differ from
run to run and are not compared. Usage: compare_json.py OLD.json NEW.json"""
import json, sys

TIMED = ("_ms", "_us", "tflops", "gbps", "speedup", "regret", "sm_clock", "samples", "provenance", "xstage_version",
         "_fraction", "hiding_ratio", "model", "share", "wait", "span", "staging")

def walk(a, b, path, out, compare_values):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}/{k}: only in {'new' if k not in a else 'old'}")
                continue
            cv = compare_values or k == "check"
            if any(t in k for t in TIMED) or k == "provenance":
                cv = False
            walk(a[k], b[k], f"{path}/{k}", out, cv if k != "check" else True)
    elif isinstance(a, list) and isinstance(b, list) and a and isinstance(a[0], dict):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} vs {len(b)} elements")
        for i, (x, y) in enumerate(zip(a, b)):
            walk(x, y, f"{path}[{i}]", out, compare_values)
    elif compare_values and a != b:
        out.append(f"{path}: {a!r} vs {b!r}")

old, new = (json.load(open(p)) for p in sys.argv[1:3])
out = []
walk(old, new, "", out, True)
print("\n".join(out) if out else "same keys; checks and layer fields equal")
sys.exit(1 if out else 0)
