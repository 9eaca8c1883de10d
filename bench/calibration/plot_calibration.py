#!/usr/bin/env python3
"""Figure-3-style plots of an `xstage calibrate` output directory (reads report.json only).

(a) issue time vs gap, remote with the local control; (b) period vs gap with the model's max-law and
the completion-coupled sum; (c) isolated issue time vs V with the knee; (d) zero-gap period vs V across
K with the fitted V/R line. Every model value is read from report.json (computed there by the C++
model library); nothing here re-implements a formula.
"""
import argparse
import json
import os
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dir", required=True, help="calibration output directory (report.json)")
    ap.add_argument("--out", default=None, help="PNG path (default DIR/fig3_calibration.png)")
    args = ap.parse_args()
    path = os.path.join(args.dir, "report.json")
    try:
        with open(path) as f:
            rep = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        print(f"plot_calibration: cannot read {path}: {e}", file=sys.stderr)
        return 2
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = rep.get("points", [])
    local_fit = rep.get("fit_is_local_control", False)
    fitted_target = "local" if local_fit else "remote"
    r_gbps = rep.get("fitted", {}).get("drain_rate_gbps")

    def sel(phase, target=None, mode=None):
        out = [p for p in pts if p["phase"] == phase and (target is None or p["target"] == target)
               and (mode is None or p["mode"] == mode)]
        return sorted(out, key=lambda p: (p["producers"], p["volume_bytes"], p["gap_us"]))

    fig, ax = plt.subplots(2, 2, figsize=(12, 9))
    title = "xstage calibrate"
    dev = rep.get("provenance", {}).get("devices", [{}])
    if dev:
        title += f" — {len(dev)} x {dev[0].get('name', '?')}"
    if local_fit:
        title += "\nONE GPU: local-target control only (no remote measurement possible)"
    fig.suptitle(title)

    # (a) issue time vs gap
    a = ax[0][0]
    for target, style in (("remote", "o"), ("local", "s")):
        g = sel("gap-sweep", target)
        if g:
            a.plot([p["gap_us"] for p in g], [p["t_iss_us"] for p in g], style, label=f"{target} (spin gap)",
                   mfc="none" if target == "local" else None)
    gm = sel("gap-sweep-mma")
    if gm:
        a.plot([p["gap_us"] for p in gm], [p["t_iss_us"] for p in gm], "^", label=f"{gm[0]['target']} (MMA gap)")
    gf = [p for p in sel("gap-sweep", fitted_target) if "pred_t_iss_us" in p]
    if gf:
        a.plot([p["gap_us"] for p in gf], [p["pred_t_iss_us"] for p in gf], "-", label="model max(T_iss0, V/R - G)")
    if gf:
        k, b = gf[0]["producers"], gf[0]["bytes_per_producer"]
        a.set_title(f"(a) issue time vs gap (K={k}, B={b/1024:.0f} KiB)")
    a.set_xlabel("gap G (µs)")
    a.set_ylabel("T_iss (µs)")
    a.legend(fontsize=8)

    # (b) period vs gap
    b_ = ax[0][1]
    if gf:
        b_.plot([p["gap_us"] for p in gf], [p["t_period_us"] for p in gf], "o", label=f"{fitted_target} measured")
        b_.plot([p["gap_us"] for p in gf], [p["pred_t_period_us"] for p in gf], "-", label="model max(T_iss0 + G, V/R)")
        b_.plot([p["gap_us"] for p in gf], [p["pred_t_period_completion_coupled_us"] for p in gf], "--",
                label="completion-coupled G + V/R")
    if gm:
        b_.plot([p["gap_us"] for p in gm], [p["t_period_us"] for p in gm], "^", label="MMA gap measured")
    b_.set_title("(b) period vs gap")
    b_.set_xlabel("gap G (µs)")
    b_.set_ylabel("T_period (µs)")
    b_.legend(fontsize=8)

    # (c) isolated issue time vs V, knee per K
    c = ax[1][0]
    iso = sel("isolated", fitted_target)
    ks = sorted({p["producers"] for p in iso})
    knees = {k["producers"]: k for k in rep.get("fitted", {}).get("knees", [])}
    for i, k in enumerate(ks):
        g = [p for p in iso if p["producers"] == k]
        color = f"C{i}"
        c.plot([p["volume_bytes"] / 2**20 for p in g], [p["t_iss_us"] for p in g], "o", color=color, label=f"K={k}")
        if all("pred_t_iss_us" in p for p in g):
            c.plot([p["volume_bytes"] / 2**20 for p in g], [p["pred_t_iss_us"] for p in g], "-", color=color)
        kn = knees.get(k)
        if kn:
            c.axvline(kn["knee_volume_bytes"] / 2**20, color=color, ls=":" if kn["knee_found"] else "-.", lw=1)
    c.set_xscale("log", base=2)
    c.set_yscale("log")
    c.set_title("(c) isolated burst issue time vs V (dotted: knee; dash-dot: no knee up to here)")
    c.set_xlabel("V = K·B (MiB)")
    c.set_ylabel("T_iss (µs)")
    c.legend(fontsize=8)

    # (d) zero-gap period vs V across K, fitted V/R
    d = ax[1][1]
    zg = sel("zero-gap", fitted_target)
    for i, k in enumerate(sorted({p["producers"] for p in zg})):
        g = [p for p in zg if p["producers"] == k]
        d.plot([p["volume_bytes"] / 2**20 for p in g], [p["t_period_us"] for p in g], "o", color=f"C{i}", label=f"K={k}")
    line = sorted((p["volume_bytes"], p["pred_drain_time_us"]) for p in zg if "pred_drain_time_us" in p)
    if line:
        d.plot([v / 2**20 for v, _ in line], [t for _, t in line], "k-",
               label=f"V/R, R = {r_gbps:.0f} GB/s" if r_gbps else "V/R")
    d.set_xscale("log", base=2)
    d.set_yscale("log")
    d.set_title(f"(d) zero-gap period vs V ({fitted_target})")
    d.set_xlabel("V = K·B (MiB)")
    d.set_ylabel("T_period (µs)")
    d.legend(fontsize=8)

    fig.tight_layout()
    out = args.out or os.path.join(args.dir, "fig3_calibration.png")
    fig.savefig(out + ".tmp.png", dpi=110)
    os.replace(out + ".tmp.png", out)
    print(f"plot_calibration: wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
