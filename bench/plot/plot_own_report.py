#!/usr/bin/env python3
"""Measured vs predicted for `xstage paper --own` (results/paper/own_report.json).

Two panels: the fused MoE's interleaved/wave time ratio per matrix configuration (bf16 and FP8) against the
prediction, with the identity and the report's band; the Ulysses hiding ratio H per shape, measured and
predicted, for the TMA bulk-store pair and the staged pair.

usage: plot_own_report.py REPORT_JSON OUT_PNG
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report")
    ap.add_argument("out")
    a = ap.parse_args(argv)
    with open(a.report) as f:
        rep = json.load(f)
    if rep.get("schema") != "xstage.paper_own/1":
        sys.exit(f"{a.report}: not an xstage.paper_own/1 report")
    s = rep["summary"]
    fig, ax = plt.subplots(1, 2, figsize=(14, 6))

    p = ax[0]
    band = s["moe_all"]["band"]
    every = [r["measured"] for k in ("moe_bf16", "moe_fp8") for r in rep[k]] + \
            [r["predicted"] for k in ("moe_bf16", "moe_fp8") for r in rep[k]]
    lo, hi = min(every) - 0.02, max(every) + 0.02
    p.plot([lo, hi], [lo, hi], "k-", lw=0.8, label="predicted = measured")
    p.fill_between([lo, hi], [lo - band, hi - band], [lo + band, hi + band], color="0.9", label=f"band ±{band:.2f}")
    p.axhline(1.0, color="0.6", lw=0.6, ls=":")
    p.axvline(1.0, color="0.6", lw=0.6, ls=":")
    for key, marker, color in (("moe_bf16", "o", "tab:blue"), ("moe_fp8", "s", "tab:red")):
        rows = rep[key]
        g = s[key]
        p.scatter([r["measured"] for r in rows], [r["predicted"] for r in rows], marker=marker, color=color,
                  label=f"{key[4:]}: n {g['n']}, median |err| {g['median_abs_error']:.3f}, max {g['max_abs_error']:.3f}, "
                        f"same faster order {g['same_side']}/{g['n']}")
    p.set_xlim(lo, hi)
    p.set_ylim(lo, hi)
    p.set_xlabel("measured interleaved/wave (t_wave / t_interleaved)")
    p.set_ylabel("predicted (simulator, platform file)")
    p.set_title("Fused MoE on 2 x H200: interleaved/wave per configuration")
    p.legend(fontsize=8, loc="upper left")

    p = ax[1]
    tma, staged = rep["ulysses_tma"], rep["ulysses_staged"]
    x = range(len(tma))
    w = 0.2
    p.bar([i - 1.5 * w for i in x], [r["measured"] for r in tma], w, color="tab:green", label="TMA measured")
    p.bar([i - 0.5 * w for i in x], [r["predicted"] for r in tma], w, color="tab:green", alpha=0.4, hatch="//",
          label="TMA predicted")
    p.bar([i + 0.5 * w for i in x], [r["measured"] for r in staged], w, color="tab:purple", label="staged measured")
    p.bar([i + 1.5 * w for i in x], [r["predicted"] for r in staged], w, color="tab:purple", alpha=0.4, hatch="//",
          label="staged predicted")
    p.axhline(0.0, color="k", lw=0.6)
    p.set_xticks(list(x))
    p.set_xticklabels([r["point"] for r in tma], rotation=20, fontsize=8)
    p.set_ylabel("hiding ratio H")
    gt, gs = s["ulysses_tma"], s["ulysses_staged"]
    p.set_title(f"Ulysses on 2 x H200: H per shape (median |err| TMA {gt['median_abs_error']:.2f}, "
                f"staged {gs['median_abs_error']:.2f})", fontsize=10)
    p.legend(fontsize=8)
    fig.suptitle(f"xstage's own results predicted from platform '{rep['platform_name']}' (nothing fitted to them)")
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1:])
