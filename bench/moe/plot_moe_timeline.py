#!/usr/bin/env python3
"""Per-SM activity timeline of the fused MoE kernel (like the X-Stage paper's Figure 9).

Reads the JSON written by `xstage moe bench --trace --trace-dump FILE` (schema xstage.moe_timeline/1)
(optionally gzip-compressed) and draws, for one rank, one row per CTA (one CTA per SM) and one panel per traced variant:
waiting for operands at tile entry, Linear-1 work, Linear-2 work, and the Combine store issue (T_RS).
A tile's work runs from its operands being ready to the next tile's entry (Linear-1) or to the start
of its stores (Linear-2). Also prints each variant's busy/wait/store shares over the plotted CTAs.

usage: plot_moe_timeline.py TIMELINE_JSON OUT_PNG [--rank R] [--ctas N] [--window-us A B]
"""
import argparse
import gzip
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"wait": "#bbbbbb", "l1": "#4c78a8", "l2": "#54a24b", "store": "#e45756"}


def segments(records):
    """(kind, start_us, end_us) of one CTA's tiles, in order."""
    out = []
    for i, (stage, _row, _n, entry, ready, s_begin, s_end) in enumerate(records):
        nxt = records[i + 1][3] if i + 1 < len(records) else None
        if ready > entry:
            out.append(("wait", entry, ready))
        if stage == 2:
            out.append(("l2", ready, s_begin))
            out.append(("store", s_begin, s_end))
        else:
            end = nxt if nxt is not None else ready
            out.append(("l1", ready, end))
    return [s for s in out if s[2] > s[1]]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("timeline")
    ap.add_argument("png")
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--ctas", type=int, default=16)
    ap.add_argument("--window-us", type=float, nargs=2, default=None, help="time window to draw")
    a = ap.parse_args()
    try:
        opener = gzip.open if a.timeline.endswith(".gz") else open
        with opener(a.timeline, "rt") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"plot_moe_timeline: cannot read {a.timeline}: {e}")
    if doc.get("schema") != "xstage.moe_timeline":
        sys.exit(f"plot_moe_timeline: {a.timeline}: schema is {doc.get('schema')!r}, expected 'xstage.moe_timeline'")
    timelines = doc.get("timelines") or []
    if not timelines:
        sys.exit(f"plot_moe_timeline: {a.timeline}: no timelines")
    fig, axes = plt.subplots(len(timelines), 1, figsize=(14, 1.2 + 0.28 * a.ctas * len(timelines)), sharex=True,
                             squeeze=False)
    for ax, tl in zip(axes[:, 0], timelines):
        rank = next((r for r in tl["ranks"] if r["rank"] == a.rank), None)
        if rank is None:
            sys.exit(f"plot_moe_timeline: no rank {a.rank} in the timeline of {tl.get('schedule')}")
        totals = {k: 0.0 for k in COLORS}
        ctas = sorted(rank["ctas"].items(), key=lambda kv: int(kv[0]))[: a.ctas]
        for y, (_cta, recs) in enumerate(ctas):
            for kind, s, e in segments(recs):
                totals[kind] += e - s
                if a.window_us and (e < a.window_us[0] or s > a.window_us[1]):
                    continue
                ax.barh(y, e - s, left=s, height=0.8, color=COLORS[kind], linewidth=0)
        span = sum(totals.values())
        shares = ", ".join(f"{k} {100 * v / span:.1f} %" for k, v in totals.items()) if span else "empty"
        title = f"{doc['shape']} T={doc['tokens_per_rank']} {doc['routing']}: {tl['schedule']}, {tl['combine_stores']}"
        print(f"{title}: {shares}")
        ax.set_title(title + f"  ({shares})", fontsize=9)
        ax.set_yticks(range(len(ctas)))
        ax.set_yticklabels([f"SM {c}" for c, _ in ctas], fontsize=6)
        ax.invert_yaxis()
        if a.window_us:
            ax.set_xlim(*a.window_us)
    axes[-1, 0].set_xlabel(f"us since rank {a.rank}'s first tile entry")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLORS.values()]
    fig.legend(handles, ["waiting for operands", "Linear-1 work", "Linear-2 work", "Combine store issue"],
               loc="upper right", fontsize=8, ncol=4)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(a.png, dpi=130)


if __name__ == "__main__":
    main()
