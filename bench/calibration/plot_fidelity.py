"""Plots an `xstage fidelity` report: predicted against measured for every calibration record.
(a) gap sweep T_iss and T_period vs G, (b) zero-gap T_period vs V per K, (c) isolated T_iss vs V
with the ramped knee, (d) relative error of every point (closed form and simulator)."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from plot_common import plot_args, save_figure, title_note  # noqa: E402

PROG = "plot_fidelity.py"


def main():
    args = plot_args(__doc__, "report_json")
    try:
        with open(args.report_json) as f:
            j = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"{PROG}: cannot read {args.report_json}: {e}")
    if j.get("schema") != "xstage.fidelity/1" or not j.get("points"):
        sys.exit(f"{PROG}: {args.report_json}: expected an xstage.fidelity/1 report with points")
    pts = j["points"]
    mib = 1024.0 * 1024.0
    fig, ax = plt.subplots(2, 2, figsize=(12, 9))

    sweep = sorted((p for p in pts if p["gap_sweep"]), key=lambda p: p["gap_us"])
    a = ax[0][0]
    g = [p["gap_us"] for p in sweep]
    a.plot(g, [p["measured_t_iss_us"] for p in sweep], "o", label="T_iss measured")
    a.plot(g, [p["model_t_iss_us"] for p in sweep], "-", label="T_iss closed form")
    a.plot(g, [p["sim_t_iss_us"] for p in sweep], "x", label="T_iss simulator")
    a.plot(g, [p["measured_t_period_us"] for p in sweep], "s", mfc="none", label="T_period measured")
    a.plot(g, [p["model_t_period_us"] for p in sweep], "--", label="T_period closed form")
    a.set(xlabel="recorded gap G (us)", ylabel="us", title="(a) gap sweep K=132, B=32 KiB")
    a.legend(fontsize=7)

    a = ax[0][1]
    zero = [p for p in pts if p["mode"] == "periodic" and p["gap_us"] == 0 and not p["gap_sweep"]]
    for k in sorted({p["producers"] for p in zero}):
        row = sorted((p for p in zero if p["producers"] == k), key=lambda p: p["bytes_per_producer"])
        v = [p["producers"] * p["bytes_per_producer"] / mib for p in row]
        line, = a.loglog(v, [p["measured_t_period_us"] for p in row], "o", label=f"K={k} measured")
        a.loglog(v, [p["model_t_period_us"] for p in row], "-", color=line.get_color())
    a.set(xlabel="V (MiB)", ylabel="T_period (us)", title="(b) zero-gap periods; lines: max(T_iss0 + G + h, V/R(K))")
    a.legend(fontsize=7)

    a = ax[1][0]
    iso = [p for p in pts if p["mode"] == "isolated"]
    for k in sorted({p["producers"] for p in iso}):
        row = sorted((p for p in iso if p["producers"] == k), key=lambda p: p["bytes_per_producer"])
        v = [p["producers"] * p["bytes_per_producer"] / mib for p in row]
        line, = a.loglog(v, [p["measured_t_iss_us"] for p in row], "o", label=f"K={k} measured")
        a.loglog(v, [p["model_t_iss_us"] for p in row], "-", color=line.get_color(), label=f"K={k} ramped knee")
        a.loglog(v, [p["sim_t_iss_us"] for p in row], ":", color=line.get_color())
    a.set(xlabel="V (MiB)", ylabel="T_iss slowest producer (us)", title="(c) isolated bursts; dotted: simulator")
    a.legend(fontsize=7)

    a = ax[1][1]
    for key, mark, lab in (("model_t_iss_rel_error", "o", "T_iss closed form"), ("sim_t_iss_rel_error", "x", "T_iss simulator"),
                           ("model_t_period_rel_error", "s", "T_period closed form")):
        xs = [i for i, p in enumerate(pts) if key in p]
        a.plot(xs, [100 * pts[i][key] for i in xs], mark, mfc="none", label=lab, ms=4)
    for y in (-5, 5):
        a.axhline(y, color="grey", lw=0.5)
    a.set(xlabel="record (periodic, then isolated)", ylabel="(pred - meas)/meas (%)", title="(d) every record")
    a.set_ylim(-40, 40)
    a.legend(fontsize=7)
    plat = j.get("platform", "")
    plat = plat.get("name", "") if isinstance(plat, dict) else plat
    fig.suptitle(f"xstage fidelity: {plat}{title_note(args.note)}")
    save_figure(fig, args.out_png)


if __name__ == "__main__":
    main()
