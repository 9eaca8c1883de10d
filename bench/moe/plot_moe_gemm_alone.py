#!/usr/bin/env python3
"""Fused MoE GEMM tiles alone against torch's grouped GEMMs, from bench/moe/moe_gemm_alone.sh's JSON.

Two panels (Linear-1, Linear-2), one group of bars per shape: TFLOP/s per GPU of the fused kernel's tiles
and of torch (torch._grouped_mm for bf16, torch._scaled_grouped_mm for FP8) per precision, with the
fused/torch ratio written above each fused bar.

usage: plot_moe_gemm_alone.py MOE_GEMM_ALONE_JSON OUT_PNG [--note TEXT]
"""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import os
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from plot_common import load_rows, plot_args, save_figure, title_note  # noqa: E402


def main():
    a = plot_args(__doc__, "gemm_json")
    j, rows = load_rows(a.gemm_json, "xstage.moe_gemm_alone", "plot_moe_gemm_alone", lambda r: r.get("fused"),
                        "rows with fused timings")
    shapes = sorted({r["shape"] for r in rows})
    precisions = [p for p in ("bf16", "fp8") if any(r["precision"] == p for r in rows)]
    by = {(r["shape"], r["precision"]): r for r in rows}
    fig, axes = plt.subplots(1, 2, figsize=(max(10, 1.6 * len(shapes)), 4.6), sharey=True)
    width = 0.8 / (2 * len(precisions))
    for ax, gemm in zip(axes, ("linear1", "linear2")):
        for pi, prec in enumerate(precisions):
            for k, who in enumerate(("fused", "torch")):
                xs, ys = [], []
                for si, s in enumerate(shapes):
                    r = by.get((s, prec))
                    v = (r or {}).get(who) or {}
                    t = v.get(f"{gemm}_tflops")
                    if t is None:
                        continue
                    xs.append(si + (2 * pi + k - len(precisions) + 0.5) * width)
                    ys.append(t)
                    if who == "fused":
                        ratio = (r.get("fused_over_torch") or {}).get(gemm)
                        if ratio:
                            ax.text(xs[-1], t + 10, f"{ratio:.2f}", ha="center", va="bottom", fontsize=6, rotation=90)
                hatch = "" if who == "fused" else "//"
                ax.bar(xs, ys, width, color=f"C{pi}", hatch=hatch, edgecolor="white" if hatch else None,
                       label=f"{who} {prec}")
        ax.set_xticks(range(len(shapes)))
        ax.set_xticklabels(shapes, fontsize=7, rotation=30, ha="right")
        ax.set_title(gemm.replace("linear", "Linear-"), fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("TFLOP/s per GPU")
    axes[1].legend(fontsize=7)
    rev = (j.get("provenance") or {}).get("git_revision", "?")
    fig.suptitle(f"fused MoE GEMM tiles alone vs torch (git {rev[:7]}); numbers: fused / torch"
                 + title_note(a.note), fontsize=9)
    save_figure(fig, a.out_png)


if __name__ == "__main__":
    main()
