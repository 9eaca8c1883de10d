#!/usr/bin/env python3
"""Two builds of the fused MoE side by side, from bench/moe/moe_ab.sh's JSON: B's speed over A's.

One panel per mode the JSON holds: `layer` (whole layers: the separate-kernel baseline, which both builds
share and which so shows the run's drift, the fused layer in expert-wave and in interleaved order) and
`gemm` (the fused kernel's Linear-1 and Linear-2 tiles alone). One group of bars per shape and precision;
each bar is b_over_a (> 1: B faster), its value written above it.

usage: plot_moe_ab.py MOE_AB_JSON OUT_PNG [--note TEXT]
"""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import os
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from plot_common import load_rows, plot_args, save_figure, title_note  # noqa: E402

SERIES = {
    "layer": [("baseline", "baseline (shared: drift)"), ("fused_wave", "fused, wave"),
              ("fused_interleaved", "fused, interleaved")],
    "gemm": [("linear1", "Linear-1 alone"), ("linear2", "Linear-2 alone")],
}
COLORS = ["#9e9e9e", "#1f77b4", "#ff7f0e"]


def main():
    a = plot_args(__doc__, "ab_json")
    j, rows = load_rows(a.ab_json, "xstage.moe_ab", "plot_moe_ab", lambda r: r.get("b_over_a"),
                        "rows with both builds measured")
    modes = [m for m in ("layer", "gemm") if any(r["mode"] == m for r in rows)]
    fig, axes = plt.subplots(len(modes), 1, figsize=(11, 3.6 * len(modes)), squeeze=False)
    for ax, mode in zip(axes[:, 0], modes):
        rs = sorted((r for r in rows if r["mode"] == mode), key=lambda r: (r["precision"], r["shape"]))
        labels = [f"{r['shape']}\n{r['precision']}, T={r['tokens_per_rank']}" for r in rs]
        series = [(k, name) for k, name in SERIES[mode] if any(k in r["b_over_a"] for r in rs)]
        width = 0.8 / max(1, len(series))
        for si, (key, name) in enumerate(series):
            xs, ys = [], []
            for ri, r in enumerate(rs):
                v = r["b_over_a"].get(key)
                if v is None:
                    continue
                xs.append(ri + (si - (len(series) - 1) / 2) * width)
                ys.append(v)
            color = COLORS[si % len(COLORS)] if mode == "layer" else COLORS[1 + si % 2]
            ax.bar(xs, ys, width, label=name, color=color)
            for x, y in zip(xs, ys):
                ax.text(x, y + 0.004, f"{y:.3f}", ha="center", va="bottom", fontsize=7, rotation=90)
        ax.axhline(1.0, color="black", linewidth=0.8)
        lo = min(min(r["b_over_a"].values()) for r in rs)
        hi = max(max(r["b_over_a"].values()) for r in rs)
        ax.set_ylim(min(0.9, lo - 0.03), max(1.1, hi + 0.06))
        ax.set_xticks(range(len(rs)))
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_ylabel("B over A (> 1: B faster)")
        ax.set_title(f"{mode}: {'whole layers, median' if mode == 'layer' else 'GEMM tiles alone, TFLOP/s'}",
                     fontsize=10)
        ax.legend(fontsize=8, loc="upper left")
    rev_a = (j.get("a") or {}).get("git_revision", "?")
    rev_b = (j.get("b") or {}).get("git_revision", "?")
    fig.suptitle(f"fused MoE, build B ({rev_b}) against build A ({rev_a}), same script{title_note(a.note)}",
                 fontsize=11)
    save_figure(fig, a.out_png)


if __name__ == "__main__":
    main()
