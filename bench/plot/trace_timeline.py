#!/usr/bin/env python3
"""Gantt chart of a Chrome trace-event JSON timeline (xstage simulate --trace, xstage trace convert).

One row per thread (the first N in process and thread order), one bar per "X" slice, coloured by the
slice's name; slices nested in another (a stall inside its epilogue store) are drawn thinner on top.

usage: trace_timeline.py TRACE_JSON OUT_PNG [--threads N] [--window-us A B] [--title TEXT]
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

# The slice names of sim::TraceSlice (include/xstage/sim/trace_events.hpp), simulated and measured alike.
COLORS = {
    "mainloop": "#4c78a8",
    "mainloop L1": "#4c78a8",
    "mainloop L2": "#54a24b",
    "epilogue store": "#f58518",
    "stall": "#e45756",
    "staging": "#b279a2",
    "operand wait": "#bbbbbb",
    "slot wait": "#9d9d9d",
    "accumulator wait": "#dddddd",
    "completion wait": "#9d755d",
}
NESTED = {"stall"}  # drawn inside their parent slice


def color(name):
    """A slice's colour; a mainloop of a named tile kind ("mainloop qkv") as a mainloop."""
    if name in COLORS:
        return COLORS[name]
    return COLORS["mainloop"] if name.startswith("mainloop ") else "#72b7b2"


def load(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"trace_timeline: cannot read {path}: {e}")
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        sys.exit(f"trace_timeline: {path}: no traceEvents array (not a Chrome trace-event JSON object)")
    return doc, events


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("png")
    ap.add_argument("--threads", type=int, default=16, help="rows to draw (first threads in order)")
    ap.add_argument("--window-us", type=float, nargs=2, default=None, help="time window to draw (us)")
    ap.add_argument("--title", default=None)
    ap.add_argument("--dpi", type=int, default=100)
    a = ap.parse_args()
    doc, events = load(a.trace)

    proc_name, proc_sort, thread_name, thread_sort = {}, {}, {}, {}
    slices = {}
    for e in events:
        key = (e.get("pid"), e.get("tid"))
        if e.get("ph") == "M":
            args = e.get("args", {})
            if e.get("name") == "process_name":
                proc_name[e.get("pid")] = args.get("name", "")
            elif e.get("name") == "process_sort_index":
                proc_sort[e.get("pid")] = args.get("sort_index", 0)
            elif e.get("name") == "thread_name":
                thread_name[key] = args.get("name", "")
            elif e.get("name") == "thread_sort_index":
                thread_sort[key] = args.get("sort_index", 0)
        elif e.get("ph") == "X":
            slices.setdefault(key, []).append((e.get("name", "?"), float(e["ts"]), float(e["dur"])))
    if not slices:
        sys.exit(f"trace_timeline: {a.trace}: no X slices")

    def order(key):
        pid, tid = key
        return (proc_sort.get(pid, pid), pid, thread_sort.get(key, tid), tid)

    rows = sorted(slices, key=order)[: a.threads]
    multi_process = len({pid for pid, _ in rows}) > 1
    fig, ax = plt.subplots(figsize=(10, 0.9 + 0.32 * len(rows)))
    seen = []
    for y, key in enumerate(rows):
        for name, ts, dur in slices[key]:
            if a.window_us and (ts + dur < a.window_us[0] or ts > a.window_us[1]):
                continue
            nested = name in NESTED
            ax.barh(y, dur, left=ts, height=0.4 if nested else 0.8, color=color(name),
                    linewidth=0, zorder=3 if nested else 2)
            if name not in seen:
                seen.append(name)
    labels = []
    for key in rows:
        t = thread_name.get(key, f"tid {key[1]}")
        labels.append(f"{proc_name.get(key[0], key[0])}: {t}" if multi_process else t)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time (us)")
    if a.window_us:
        ax.set_xlim(*a.window_us)
    ax.grid(axis="x", color="#dddddd", linewidth=0.5, zorder=0)
    title = a.title
    if title is None:
        other = doc.get("otherData", {}) if isinstance(doc.get("otherData"), dict) else {}
        title = a.trace
        if all(k in other for k in ("producers", "bytes_per_producer", "gap_us")):
            title = (f"simulated: {other['producers']} producers x {other['bytes_per_producer']:g} B, "
                     f"gap {other['gap_us']:g} us")
            platform = other.get("platform", {})
            if isinstance(platform, dict) and platform.get("name"):
                title += f", platform {platform['name']} ({platform.get('source', '')})"
        elif "shape" in other:
            title = f"measured: {other['shape']} T={other.get('tokens_per_rank', '?')} {other.get('routing', '')}"
    ax.set_title(title, fontsize=9)
    fig.legend(handles=[Patch(color=color(n), label=n) for n in seen], fontsize=7, ncol=len(seen),
               loc="lower center", frameon=False)
    fig.tight_layout(rect=(0, 0.05 if len(rows) > 4 else 0.12, 1, 1))
    fig.savefig(a.png, dpi=a.dpi)
    print(f"wrote {a.png}: {len(rows)} threads, {sum(len(slices[k]) for k in rows)} slices")


if __name__ == "__main__":
    main()
