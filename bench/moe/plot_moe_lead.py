#!/usr/bin/env python3
"""Interleaved / expert-wave layer time per shape and precision at each lead D of a lead sweep.

Reads the JSON written by bench/moe/moe_lead_sweep.sh (schema xstage.moe_lead) and draws one group of bars per
(shape, precision), one bar per D (ratio < 1: the interleaved order is faster), with a line at 1.

usage: plot_moe_lead.py MOE_LEAD_JSON OUT_PNG [--note TEXT]
"""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import os
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from plot_common import load_rows, plot_args, save_figure, title_note  # noqa: E402


def main():
    a = plot_args(__doc__, "lead_json", "appended to the title (e.g. what the leads are)")
    j, rows = load_rows(a.lead_json, "xstage.moe_lead", "plot_moe_lead",
                        lambda r: r.get("wave_ms") and r.get("interleaved"),
                        "row with a wave time and interleaved runs")
    width = 0.38
    fig, ax = plt.subplots(figsize=(max(8, 1.1 * len(rows)), 4.8))
    labels = []
    for x, r in enumerate(rows):
        labels.append(f"{r['shape']}\n{r['precision']}")
        runs = r["interleaved"]
        for i, run in enumerate(runs):
            off = (i - (len(runs) - 1) / 2) * width
            v = run["interleaved_over_wave_time"]
            ax.bar(x + off, v, width, color=f"C{i}", label=None)
            ax.text(x + off, v + 0.005, f"D={run['lead_rows']}", ha="center", va="bottom", fontsize=6, rotation=90)
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels, fontsize=7, rotation=30, ha="right")
    ax.set_ylabel("interleaved / wave layer time")
    lo = min(run["interleaved_over_wave_time"] for r in rows for run in r["interleaved"])
    hi = max(run["interleaved_over_wave_time"] for r in rows for run in r["interleaved"])
    ax.set_ylim(min(0.85, lo - 0.02), max(1.15, hi + 0.05))
    ax.set_title(f"fused MoE, lead D of the interleaved order (git {j.get('git_revision', '?')})"
                 + title_note(a.note), fontsize=9)
    save_figure(fig, a.out_png)


if __name__ == "__main__":
    main()
