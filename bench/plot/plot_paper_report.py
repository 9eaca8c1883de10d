#!/usr/bin/env python3
"""Published vs predicted for every row of `xstage paper` (results/paper/report.json).

Four panels: Table 2's spans and stalls, the 84-configuration distribution (predicted speedups with the
paper's geomean, median, max and min marked), Table 3's speedups per M, and every row's relative error
(goal met / missed / not predicted).

usage: plot_paper_report.py REPORT_JSON OUT_PNG
"""
import argparse
import json
import math
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def rows_with(rows, prefix, suffix):
    return [r for r in rows if r["id"].startswith(prefix) and r["id"].endswith(suffix) and r["predicted"] is not None]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report")
    ap.add_argument("out")
    a = ap.parse_args(argv)
    with open(a.report) as f:
        rep = json.load(f)
    if rep.get("schema") != "xstage.paper/1":
        sys.exit(f"{a.report}: not an xstage.paper/1 report")
    rows = rep["rows"]
    fig, ax = plt.subplots(2, 2, figsize=(14, 10))

    # Table 2: published vs predicted, spans and stalls.
    p = ax[0][0]
    for suffix, marker, label in ((".wave_span", "o", "wave T_RS"), (".int_span", "s", "interleaved T_RS"),
                                  (".wave_stall", "^", "wave MMA stall"), (".int_stall", "v", "int. MMA stall")):
        rs = rows_with(rows, "table2.", suffix)
        p.scatter([r["published"] for r in rs], [r["predicted"] for r in rs], marker=marker, label=label)
        for r in rs:
            p.annotate(r["id"].split(".")[1], (r["published"], r["predicted"]), fontsize=6)
    lim = [0, 11]
    p.plot(lim, lim, "k-", lw=0.8)
    p.fill_between(lim, [x * 0.85 for x in lim], [x * 1.15 for x in lim], color="0.9", label="±15 %")
    p.set_xlim(lim)
    p.set_ylim(lim)
    p.set_xlabel("published (us)")
    p.set_ylabel("predicted (us)")
    p.set_title("Table 2: per-tile spans and stalls")
    p.legend(fontsize=7)

    # 84 configurations.
    p = ax[0][1]
    d = rep.get("details", {}).get("moe84")
    if d:
        sp = sorted(c["predicted_speedup"] for c in d["configurations"])
        p.hist(sp, bins=30, color="#4c78a8", label=f"predicted ({len(sp)} configurations)")
        for v, style, name in ((1.18, "-", "paper geomean 1.18"), (1.17, "--", "paper median 1.17"),
                               (1.62, ":", "paper max 1.62"), (0.94, "-.", "paper min ~0.94")):
            p.axvline(v, color="#e45756", ls=style, label=name)
        gm = math.exp(sum(math.log(x) for x in sp) / len(sp))
        p.axvline(gm, color="k", ls="-", label=f"predicted geomean {gm:.3f}")
        p.legend(fontsize=7)
    p.set_xlabel("interleaved / wave speedup")
    p.set_title("MegaMoE 84-configuration distribution")

    # Table 3 speedups.
    p = ax[1][0]
    for fa, color in (("FA3", "#4c78a8"), ("FA4", "#f58518")):
        rs = [r for r in rows if r["id"].startswith(f"table3.{fa}.speedup.")]
        ms = [int(r["id"].rsplit(".", 1)[1].rstrip("k")) for r in rs]
        p.plot(ms, [r["published"] for r in rs], "o-", color=color, label=f"{fa} published")
        p.plot(ms, [r["predicted"] for r in rs], "s--", color=color, label=f"{fa} predicted")
    p.set_xlabel("M (K tokens)")
    p.set_ylabel("serial / fused")
    p.set_title("Table 3: sender-visible speedup")
    p.legend(fontsize=7)

    # Relative error of every predicted row.
    p = ax[1][1]
    colors = {"met": "#54a24b", "within 10 %": "#54a24b", "missed": "#e45756", "off > 10 %": "#e45756"}
    ys = list(range(len(rows)))
    for y, r in zip(ys, rows):
        if r["predicted"] is None or r["rel_error"] is None:
            p.plot([0], [y], "x", color="0.5")
            continue
        p.barh(y, max(-1.0, min(1.0, r["rel_error"])), color=colors.get(r["verdict"], "0.5"))
    p.axvline(0.1, color="k", lw=0.5, ls=":")
    p.axvline(-0.1, color="k", lw=0.5, ls=":")
    p.set_yticks(ys)
    p.set_yticklabels([r["id"] for r in rows], fontsize=4)
    p.invert_yaxis()
    p.set_xlim(-1, 1)
    p.set_xlabel("relative error (clipped to ±100 %); green: goal met / within 10 %, red: missed, x: not predicted")
    p.set_title("every row")

    s = rep["summary"]
    fig.suptitle(f"X-Stage paper as a test set ({rep['platform_name']}): {s['goal_met']} goals met, "
                 f"{s['goal_missed']} missed, {s['within_10_percent']} other rows within 10 %, "
                 f"{s['off_over_10_percent']} off > 10 %, {s['not_predicted']} not predicted")
    fig.tight_layout()
    fig.savefig(a.out, dpi=130)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
