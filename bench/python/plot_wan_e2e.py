#!/usr/bin/env python3
"""Bar plot of bench/python/wan_e2e.py's JSON: whole-forward median time per attention implementation (min-max
whiskers) and the two attention calls alone."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "common"))
from plot_common import load_rows, plot_args, save_figure, title_note  # noqa: E402

SCHEMA = "xstage.wan_e2e"


def plot(result, path, note=""):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, w = result["rows"], result["workload"]
    names = [r["impl"] for r in rows]
    colors = {"xstage": "tab:blue", "cudnn": "tab:gray", "fa4": "tab:orange"}
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4.2))
    med = [r["median_ms"] for r in rows]
    err = [[m - r["min_ms"] for m, r in zip(med, rows)], [r["max_ms"] - m for m, r in zip(med, rows)]]
    bars = ax0.bar(names, med, yerr=err, capsize=4, color=[colors.get(n, "tab:green") for n in names])
    for b, m in zip(bars, med):
        ax0.annotate(f"{m:.0f} ms", (b.get_x() + b.get_width() / 2, m), ha="center", va="bottom", fontsize=8,
                     xytext=(0, 3), textcoords="offset points")
    ax0.set_ylabel("forward time, median (ms)")
    ax0.set_title(f"{w['blocks']} block{'s' if w['blocks'] != 1 else ''}, {w['video_tokens']:,} video + {w['text_tokens']} text tokens")
    width = 0.8 / max(1, len(rows))
    for n, r in enumerate(rows):
        a = r.get("attention_only") or {}
        ys = [a.get(s, {}).get("median_ms", float("nan")) for s in ("self", "cross")]
        bars = ax1.bar([x + n * width for x in range(2)], ys, width, label=r["label"], color=colors.get(r["impl"]))
        for b, y in zip(bars, ys):
            ax1.annotate(f"{y:.3g}", (b.get_x() + b.get_width() / 2, y), ha="center", va="bottom", fontsize=7,
                         xytext=(0, 2), textcoords="offset points")
    ax1.set_xticks([x + width * (len(rows) - 1) / 2 for x in range(2)])
    ax1.set_xticklabels([f"self {w['video_tokens']:,}^2", f"cross {w['video_tokens']:,} x {w['text_tokens']}"])
    ax1.set_yscale("log")   # the self-attention call is ~100x the cross-attention one
    ax1.margins(y=0.15)
    ax1.set_ylabel("one attention call, median (ms)")
    ax1.set_title(f"attention alone, {w['heads']} heads x {w['head_dim']}")
    ax1.legend(fontsize=8)
    for ax in (ax0, ax1):
        ax.grid(True, axis="y", alpha=0.3)
    p = result["provenance"]
    fig.suptitle(f"Wan2.1-14B-shaped transformer at {w['width']}x{w['height']}, {w['frames']} frames, bf16, "
                 f"{p['device']}{title_note(note)}", fontsize=10)
    save_figure(fig, path)


def main():
    args = plot_args(__doc__, "json")
    result, _ = load_rows(args.json, SCHEMA, "plot_wan_e2e", lambda r: "median_ms" in r, "timed rows")
    plot(result, args.out_png, args.note)


if __name__ == "__main__":
    main()
