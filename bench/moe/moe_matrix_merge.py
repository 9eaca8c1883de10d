#!/usr/bin/env python3
"""Merge the fused-MoE configuration matrix (bench/moe/moe_matrix.sh) into one JSON, a markdown table and a plot.

    bench/moe/moe_matrix_merge.py OUT_DIR RESULT_JSON TABLE_MD [PNG]

Reads OUT_DIR/matrix/run_*.json (`xstage moe bench` results, schema xstage.moe_bench version 2) and, when
present, OUT_DIR/matrix/manifest.tsv (the script's plan and each run's status). A configuration is
(shape, tokens per rank, routing). Per configuration: the interleaved schedule's speedup over expert-wave
(ratio of layer medians), the bench's predicted speedup and choice (`schedule_prediction`, absent from
older binaries) and the choice's measured regret t(choice) / min(t_wave, t_interleaved) - 1, and the fused
schedules against the separate-kernel baseline where a run timed it. Runs that are missing, unreadable or
partial, failed checks and missing implementations are listed as problems; configurations with a failed
check or without both schedules are kept in the table and left out of the summaries, which say so.
"""
import csv
import datetime
import glob
import json
import math
import os
import re
import statistics
import sys

SCHEMA = "xstage.moe_bench"
SCHEMA_VERSION = 2
WAVE, INTERLEAVED, BASELINE = "fused_wave", "fused_interleaved", "baseline"
REGRET_TOLERANCE = 0.03  # auto's choice counts as good when within 3 % of the faster schedule
ROUTINGS = ("balanced", "skewed")
CHECK_CELL = {True: "ok", False: "FAIL", None: "–"}  # None: no usable run


# --- reading --------------------------------------------------------------------------------------------------

def run_index(path):
    m = re.search(r"run_(\d+)\.json$", path)
    return int(m.group(1)) if m else None


def read_manifest(matrix_dir):
    """Planned runs by index (dicts with shape, tokens, routing, impl, status, rc, seconds), or {} if none."""
    path = os.path.join(matrix_dir, "manifest.tsv")
    if not os.path.exists(path):
        return {}
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    planned = {}
    for r in rows:
        try:
            planned[int(r["index"])] = r
        except (KeyError, TypeError, ValueError):
            continue
    return planned


def structural_problems(run):
    """What a run JSON lacks that the merge needs (empty when it is usable)."""
    out = []
    if run.get("schema") != SCHEMA:
        out.append(f"schema {run.get('schema')!r}, expected {SCHEMA!r}")
    if run.get("version") != SCHEMA_VERSION:
        out.append(f"version {run.get('version')!r}, expected {SCHEMA_VERSION}")
    if not isinstance(run.get("shape"), dict) or "name" not in run["shape"]:
        out.append("no shape.name")
    if not isinstance(run.get("tokens_per_rank"), int):
        out.append("no tokens_per_rank")
    if not isinstance(run.get("routing"), dict) or "kind" not in run["routing"]:
        out.append("no routing.kind")
    if not isinstance(run.get("impls"), list) or not run["impls"]:
        out.append("no impls")
    return out


def load_runs(out_dir):
    """Usable runs (index, file, data) and problems: unreadable or partial files, planned runs without a file."""
    matrix_dir = os.path.join(out_dir, "matrix")
    planned = read_manifest(matrix_dir)
    runs, problems = [], []
    files = sorted(glob.glob(os.path.join(matrix_dir, "run_*.json")), key=lambda p: (run_index(p) or 0, p))
    seen = set()
    for path in files:
        idx = run_index(path)
        name = os.path.basename(path)
        if idx is None:
            problems.append({"run": None, "file": name, "problem": "not named run_<number>.json; ignored"})
            continue
        seen.add(idx)
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            problems.append({"run": idx, "file": name, "problem": f"unreadable ({type(e).__name__}: {e})"})
            continue
        bad = structural_problems(data) if isinstance(data, dict) else ["not a JSON object"]
        if bad:
            problems.append({"run": idx, "file": name, "problem": "partial run: " + "; ".join(bad)})
            continue
        plan = planned.get(idx)
        if plan and plan.get("status") not in (None, "ok"):
            problems.append({"run": idx, "file": name,
                             "problem": f"bench exited with rc={plan.get('rc')} ({plan.get('status')}); result kept"})
        runs.append({"index": idx, "file": name, "manifest": plan, "data": data})
    for idx in sorted(set(planned) - seen):
        p = planned[idx]
        what = f"{p.get('shape')} T={p.get('tokens')} {p.get('routing')} ({p.get('impl')})"
        status = p.get("status")
        if status == "skipped":
            reason = "skipped: matrix budget spent"
        else:
            reason = f"no result file ({status}, rc={p.get('rc')})"
        problems.append({"run": idx, "file": None, "problem": f"{what}: {reason}"})
    return runs, problems, planned


# --- per configuration ----------------------------------------------------------------------------------------

def median_ms(impl):
    """Layer median of one implementation: the bench's value, else the median of its samples, else None."""
    t = impl.get("timing") or {}
    if number(t.get("layer_median_ms")):
        return number(t["layer_median_ms"])
    samples = [x for x in (t.get("layer_samples_ms") or []) if number(x)]
    return float(statistics.median(samples)) if samples else None


def number(x):
    """x when it is a finite number (a missing or malformed field reads as None)."""
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


def ratio(a, b):
    return a / b if a is not None and b else None


def impl_summary(impl):
    t = impl.get("timing") or {}
    c = impl.get("check") or {}
    out = {"median_ms": median_ms(impl), "tflops": t.get("tflops"), "nvlink_gbps": t.get("nvlink_gbps"),
           "samples": len(t.get("layer_samples_ms") or []), "check_passed": c.get("passed"),
           "check_rel_l2": c.get("rel_l2")}
    for k in ("lead_rows", "experts_per_wave"):
        if k in impl:
            out[k] = impl[k]
    return out


def normalize_choice(choice):
    if choice in ("wave", "expert_wave", "expert-wave", WAVE):
        return "wave"
    if choice in ("interleaved", INTERLEAVED):
        return "interleaved"
    return None


def measure_run(run):
    """What one run says about its configuration (schedules, prediction, baseline), with its own problems."""
    data = run["data"]
    impls = {x.get("name"): x for x in data["impls"] if isinstance(x, dict)}
    problems = []
    expected = [WAVE, INTERLEAVED] + ([BASELINE] if data.get("impl") == "both" else [])
    for name in expected:
        if name not in impls:
            problems.append(f"run {run['index']}: {name} missing")
    summaries = {}
    for name, x in impls.items():
        s = impl_summary(x)
        summaries[name] = s
        if s["median_ms"] is None:
            problems.append(f"run {run['index']}: {name} has no timing")
        if s["check_passed"] is not True:
            if s["check_passed"] is None:
                state = "no check result"
            else:
                state = f"check FAILED (rel L2 {fmt(s['check_rel_l2'], '.1e')})"
            problems.append(f"run {run['index']}: {name} {state}")
    t_wave = summaries.get(WAVE, {}).get("median_ms")
    t_int = summaries.get(INTERLEAVED, {}).get("median_ms")
    t_base = summaries.get(BASELINE, {}).get("median_ms")
    m = {"run": run["index"], "impl": data.get("impl"), "impls": summaries, "problems": problems,
         "checks_passed": all(s["check_passed"] is True for s in summaries.values()),
         "wave_ms": t_wave, "interleaved_ms": t_int, "baseline_ms": t_base,
         "interleaved_speedup_vs_wave": ratio(t_wave, t_int),
         "bench_interleaved_speedup_vs_wave": data.get("interleaved_speedup_vs_wave")}
    pred = data.get("schedule_prediction")
    if isinstance(pred, dict):
        m["prediction"] = dict(pred, predicted_speedup=number(pred.get("predicted_speedup")))  # all fields kept
        if normalize_choice(pred.get("choice")) is None:
            problems.append(f"run {run['index']}: schedule_prediction.choice {pred.get('choice')!r} "
                            "is neither wave nor interleaved")
    else:
        m["prediction"] = None
    return m


def auto_outcome(m):
    """The predicted choice's measured time and regret, for a measurement with both schedules and a prediction."""
    pred = m.get("prediction")
    choice = normalize_choice(pred.get("choice")) if pred else None
    if choice is None or m["wave_ms"] is None or m["interleaved_ms"] is None:
        return {"choice": choice, "auto_ms": None, "regret": None, "correct": None}
    t_choice = m["wave_ms"] if choice == "wave" else m["interleaved_ms"]
    best = min(m["wave_ms"], m["interleaved_ms"])
    faster = "wave" if m["wave_ms"] <= m["interleaved_ms"] else "interleaved"
    return {"choice": choice, "auto_ms": t_choice, "regret": t_choice / best - 1.0, "correct": choice == faster}


def placeholder(shape, tokens, routing, entries):
    """A planned configuration without any usable run: kept in the table, never in a summary."""
    why = [f"run {e['index']} ({e.get('impl')}, {e.get('status')})" for e in entries]
    return {"shape": shape, "tokens_per_rank": tokens, "routing": routing, "runs": [e["index"] for e in entries],
            "primary_run": min(e["index"] for e in entries), "wave_ms": None, "interleaved_ms": None,
            "interleaved_speedup_vs_wave": None, "repeat_interleaved_speedup_vs_wave": [], "predicted_speedup": None,
            "prediction": None, "auto_choice": None, "auto_ms": None, "auto_regret": None,
            "auto_choice_is_faster": None, "impls": {}, "checks_passed": None,
            "problems": ["no usable result from " + ", ".join(why)], "in_summary": False, "placeholder": True}


def build_configurations(runs, planned):
    """One entry per (shape, T, routing). The primary measurement is the fused-only run when there is one; a
    second run of the same configuration (the --impl both run) supplies the baseline and a repeat of the
    interleaved/wave ratio. Planned configurations without a usable run appear as placeholders."""
    by_key = {}
    for run in runs:
        d = run["data"]
        key = (d["shape"]["name"], d["tokens_per_rank"], d["routing"]["kind"])
        by_key.setdefault(key, []).append(measure_run(run))
    configs = []
    missing = {}
    for idx, e in planned.items():
        try:
            key = (e["shape"], int(e["tokens"]), e["routing"])
        except (KeyError, TypeError, ValueError):
            continue
        if key not in by_key:
            missing.setdefault(key, []).append(dict(e, index=idx))
    for (shape, tokens, routing), entries in missing.items():
        configs.append(placeholder(shape, tokens, routing, entries))
    for (shape, tokens, routing), ms in by_key.items():
        complete = [m for m in ms if m["interleaved_speedup_vs_wave"] is not None]
        primary = next((m for m in complete if m["impl"] == "fused"), complete[0] if complete else ms[0])
        with_base = next((m for m in ms if m["baseline_ms"] is not None), None)
        auto = auto_outcome(primary)
        pred = primary.get("prediction") or {}
        c = {"shape": shape, "tokens_per_rank": tokens, "routing": routing,
             "runs": [m["run"] for m in ms], "primary_run": primary["run"],
             "wave_ms": primary["wave_ms"], "interleaved_ms": primary["interleaved_ms"],
             "interleaved_speedup_vs_wave": primary["interleaved_speedup_vs_wave"],
             "repeat_interleaved_speedup_vs_wave": [m["interleaved_speedup_vs_wave"] for m in complete
                                                    if m is not primary],
             "predicted_speedup": pred.get("predicted_speedup"),
             "prediction": primary.get("prediction"),
             "auto_choice": auto["choice"], "auto_ms": auto["auto_ms"], "auto_regret": auto["regret"],
             "auto_choice_is_faster": auto["correct"],
             "impls": primary["impls"],
             "checks_passed": all(m["checks_passed"] for m in ms),
             "problems": [p for m in ms for p in m["problems"]]}
        if c["predicted_speedup"] and c["interleaved_speedup_vs_wave"]:
            c["predicted_over_measured"] = c["predicted_speedup"] / c["interleaved_speedup_vs_wave"]
        if with_base:
            tb, tw, ti = with_base["baseline_ms"], with_base["wave_ms"], with_base["interleaved_ms"]
            fastest = min((t for t in (tw, ti) if t is not None), default=None)
            c["baseline"] = {"run": with_base["run"], "baseline_ms": tb, "fused_wave": ratio(tb, tw),
                             "fused_interleaved": ratio(tb, ti), "fused_best": ratio(tb, fastest),
                             "auto": ratio(tb, auto_outcome(with_base)["auto_ms"]),
                             "checks_passed": with_base["checks_passed"]}
        # The checks column covers every run of the configuration; a summary uses only runs whose checks passed.
        c["in_summary"] = primary["checks_passed"] and c["interleaved_speedup_vs_wave"] is not None
        configs.append(c)
    shape_order = {}
    for c in configs:  # shapes in the order the runs first met them (the script's plan)
        shape_order.setdefault(c["shape"], min(x["primary_run"] for x in configs if x["shape"] == c["shape"]))
    configs.sort(key=lambda c: (shape_order[c["shape"]], c["tokens_per_rank"], ROUTINGS.index(c["routing"])
                                if c["routing"] in ROUTINGS else 9, c["routing"]))
    return configs


# --- summaries ------------------------------------------------------------------------------------------------

def label(c):
    return f"{c['shape']} T={c['tokens_per_rank']} {c['routing']}"


def ratio_stats(configs, field):
    vals = [(c[field], c) for c in configs if c.get(field)]
    if not vals:
        return {"n": 0}
    xs = [v for v, _ in vals]
    lo = min(vals, key=lambda p: p[0])
    hi = max(vals, key=lambda p: p[0])
    return {"n": len(xs), "geomean": math.exp(sum(math.log(x) for x in xs) / len(xs)), "median": statistics.median(xs),
            "min": lo[0], "min_at": label(lo[1]), "max": hi[0], "max_at": label(hi[1])}


def auto_stats(configs):
    have = [c for c in configs if c["auto_regret"] is not None]
    if not have:
        return {"n": 0, "note": "no run carries schedule_prediction"}
    worst = max(have, key=lambda c: c["auto_regret"])
    return {"n": len(have),
            "choice_is_faster": sum(1 for c in have if c["auto_choice_is_faster"]),
            "within_tolerance": sum(1 for c in have if c["auto_regret"] <= REGRET_TOLERANCE),
            "tolerance": REGRET_TOLERANCE,
            "max_regret": worst["auto_regret"], "max_regret_at": label(worst),
            "geomean_time_over_best": math.exp(sum(math.log1p(c["auto_regret"]) for c in have) / len(have)),
            "predicted_over_measured": ratio_stats(have, "predicted_over_measured")}


def baseline_stats(configs):
    have = [c for c in configs if c.get("baseline") and c["baseline"]["checks_passed"]]
    out = {"n": len(have)}
    for k in ("fused_wave", "fused_interleaved", "fused_best", "auto"):
        flat = [dict(v=c["baseline"][k], shape=c["shape"], tokens_per_rank=c["tokens_per_rank"], routing=c["routing"])
                for c in have if c["baseline"].get(k)]
        out[k] = ratio_stats(flat, "v")
    return out


def summarize(configs):
    used = [c for c in configs if c["in_summary"]]
    left_out = [label(c) for c in configs if not c["in_summary"]]
    groups = {"all": used}
    for r in ROUTINGS:
        groups[r] = [c for c in used if c["routing"] == r]
    for t in sorted({c["tokens_per_rank"] for c in used}):
        groups[f"T={t}"] = [c for c in used if c["tokens_per_rank"] == t]
        for r in ROUTINGS:
            groups[f"T={t} {r}"] = [c for c in used if c["tokens_per_rank"] == t and c["routing"] == r]
    return {"configurations": len(configs), "in_summary": len(used), "left_out_of_summary": left_out,
            "interleaved_speedup_vs_wave": {g: ratio_stats(cs, "interleaved_speedup_vs_wave")
                                            for g, cs in groups.items()},
            "auto": {g: auto_stats(cs) for g, cs in groups.items()},
            "fused_vs_baseline": baseline_stats(configs)}


# --- outputs --------------------------------------------------------------------------------------------------

def fmt(x, spec=".2f", none="–"):
    return none if x is None else format(x, spec)


def table_markdown(configs, summary, problems, out_dir, precision):
    lines = [f"# Fused MoE ({precision}): interleaved vs expert-wave ({out_dir})", "",
             "Layer ms = median over the timed runs (slower rank). interl./wave = t_wave / t_interleaved; "
             "predicted = the bench's schedule_prediction (wave makespan / interleaved makespan); regret = "
             "t(auto's choice) / min(t_wave, t_interleaved) - 1.", "",
             "| shape | T/rank | routing | wave ms | interl. ms | interl./wave | predicted | auto | regret | "
             "baseline ms | wave vs base | interl. vs base | checks | run | notes |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in configs:
        b = c.get("baseline") or {}
        notes = []
        if c["repeat_interleaved_speedup_vs_wave"]:
            notes.append("repeat interl./wave " + ", ".join(fmt(x) for x in c["repeat_interleaved_speedup_vs_wave"]))
        if not c["in_summary"]:
            notes.append("not in summary")
        notes += c["problems"]
        regret = None if c["auto_regret"] is None else 100 * c["auto_regret"]
        lines.append(
            f"| {c['shape']} | {c['tokens_per_rank']} | {c['routing']} | {fmt(c['wave_ms'], '.3f')} | "
            f"{fmt(c['interleaved_ms'], '.3f')} | {fmt(c['interleaved_speedup_vs_wave'])} | "
            f"{fmt(c['predicted_speedup'])} | "
            f"{c['auto_choice'] or '–'} | {fmt(regret, '.1f')}{'' if regret is None else ' %'} | "
            f"{fmt(b.get('baseline_ms'), '.3f')} | {fmt(b.get('fused_wave'))}{'x' if b.get('fused_wave') else ''} | "
            f"{fmt(b.get('fused_interleaved'))}{'x' if b.get('fused_interleaved') else ''} | "
            f"{CHECK_CELL[c['checks_passed']]} | {','.join(str(r) for r in c['runs'])} | {'; '.join(notes)} |")
    lines += ["", f"## Summary ({summary['in_summary']} of {summary['configurations']} configurations)", ""]
    if summary["left_out_of_summary"]:
        lines += ["Left out (no result, a failed check or a schedule missing): "
                  + ", ".join(summary["left_out_of_summary"]), ""]
    lines += ["interl./wave over configurations; auto: picks the faster schedule / within "
              f"{100 * REGRET_TOLERANCE:.0f} % of it, of the configurations with a prediction.", "",
              "| group | n | geomean | median | min | max | auto faster | auto within tol. | auto max regret | "
              "auto geomean t/best | predicted/measured median (range) |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for g, st in summary["interleaved_speedup_vs_wave"].items():
        if not st["n"]:
            continue
        a = summary["auto"][g]
        if a["n"]:
            pm = a["predicted_over_measured"]
            auto_cells = (f"{a['choice_is_faster']}/{a['n']} | {a['within_tolerance']}/{a['n']} | "
                          f"{100 * a['max_regret']:.1f} % ({a['max_regret_at']}) | {a['geomean_time_over_best']:.3f} | "
                          + (f"{pm['median']:.3f} ({pm['min']:.3f}–{pm['max']:.3f})" if pm["n"] else "–"))
        else:
            auto_cells = "– | – | – | – | –"
        lines.append(f"| {g} | {st['n']} | {st['geomean']:.3f} | {st['median']:.3f} | "
                     f"{st['min']:.3f} ({st['min_at']}) | "
                     f"{st['max']:.3f} ({st['max_at']}) | {auto_cells} |")
    if not summary["auto"]["all"]["n"]:
        lines += ["", "No run carries schedule_prediction: the auto columns are empty."]
    fb = summary["fused_vs_baseline"]
    lines.append("")
    if fb["n"]:
        for k in ("fused_wave", "fused_interleaved", "fused_best", "auto"):
            st = fb[k]
            if st["n"]:
                lines.append(f"- {k} vs baseline: geomean {st['geomean']:.2f}x, min {st['min']:.2f}x ({st['min_at']}), "
                             f"max {st['max']:.2f}x ({st['max_at']}), n = {st['n']}")
    else:
        lines.append("- fused vs baseline: no run timed the baseline with passing checks")
    lines += ["", f"## Problems ({len(problems)})", ""]
    lines += [f"- {p}" for p in problems] if problems else ["- none"]
    return "\n".join(lines) + "\n"


def plot(configs, png, precision):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    colors = {"balanced": "#4477aa", "skewed": "#ee6677"}
    tokens = sorted({c["tokens_per_rank"] for c in configs})
    alpha = {t: 0.45 + 0.55 * (i + 1) / len(tokens) for i, t in enumerate(tokens)}
    fig, (ax, axr) = plt.subplots(2, 1, figsize=(max(9, 0.45 * len(configs) + 4), 7.5), sharex=True,
                                  gridspec_kw={"height_ratios": [3, 1]})
    x, ticks, tick_labels, pos = 0.0, [], [], []
    shapes = list(dict.fromkeys(c["shape"] for c in configs))
    for s in shapes:
        group = [c for c in configs if c["shape"] == s]
        start = x
        for c in group:
            pos.append((x, c))
            x += 1
        ticks.append((start + x - 1) / 2)
        tick_labels.append(s)
        x += 0.8  # gap between shapes
    for xi, c in pos:
        y = c["interleaved_speedup_vs_wave"]
        if y is None:
            what = "no result" if not c["impls"] else "schedule missing"
            ax.text(xi, 0.02, f"{c['tokens_per_rank'] // 1024}K {c['routing']}: {what}", rotation=90, ha="center",
                    va="bottom", fontsize=7, color="gray", transform=ax.get_xaxis_transform())
            axr.text(xi, 0.02, "n/a", rotation=90, ha="center", va="bottom", fontsize=6, color="gray",
                     transform=axr.get_xaxis_transform())
            continue
        ax.bar(xi, y, width=0.85, color=colors.get(c["routing"], "gray"), alpha=alpha[c["tokens_per_rank"]],
               edgecolor="black" if c["checks_passed"] else "red", hatch=None if c["checks_passed"] else "xx")
        ax.text(xi, y, f"{c['tokens_per_rank'] // 1024}K", ha="center", va="bottom", fontsize=6)
        if c["predicted_speedup"]:
            ax.plot(xi, c["predicted_speedup"], marker="D", color="black", markersize=5, linestyle="none")
        for r in c["repeat_interleaved_speedup_vs_wave"]:
            ax.plot(xi, r, marker="_", color="black", markersize=10, linestyle="none")
        if c["auto_regret"] is not None:
            axr.bar(xi, 100 * c["auto_regret"], width=0.85, color=colors.get(c["routing"], "gray"),
                    alpha=alpha[c["tokens_per_rank"]], edgecolor="black")
        else:
            axr.text(xi, 0.02, "n/a", rotation=90, ha="center", va="bottom", fontsize=6, color="gray",
                     transform=axr.get_xaxis_transform())
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_ylabel("t_wave / t_interleaved")
    ax.set_title(f"Fused MoE ({precision}), interleaved vs expert-wave (median layer time; label = tokens per rank)")
    from matplotlib.patches import Patch
    from matplotlib.lines import Line2D
    handles = [Patch(facecolor=colors[r], edgecolor="black", label=r) for r in ROUTINGS]
    handles += [Line2D([], [], marker="D", color="black", linestyle="none", label="predicted (bench)"),
                Line2D([], [], marker="_", color="black", markersize=10, linestyle="none", label="repeat run"),
                Patch(facecolor="white", edgecolor="red", hatch="xx", label="check failed")]
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_xlim(-0.7, x - 0.8 - 0.3)
    axr.axhline(100 * REGRET_TOLERANCE, color="gray", linestyle="--", linewidth=0.8)
    axr.set_ylabel("auto regret %")
    axr.set_xticks(ticks)
    axr.set_xticklabels(tick_labels, rotation=20, ha="right", fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=130)
    plt.close(fig)


def main(argv):
    if len(argv) not in (4, 5):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    out_dir, result_json, table_md = argv[1:4]
    png = argv[4] if len(argv) == 5 else None
    runs, run_problems, planned = load_runs(out_dir)
    if not runs and not run_problems:
        run_problems.append({"run": None, "file": None,
                             "problem": f"no run_*.json and no manifest under {os.path.join(out_dir, 'matrix')}"})
    configs = build_configurations(runs, planned)
    problems = [(f"run {p['run']}" if p["run"] is not None else "matrix") + (f" ({p['file']})" if p["file"] else "")
                + f": {p['problem']}" for p in run_problems]
    # A placeholder's reason is already among the run problems.
    problems += [f"{label(c)}: {p}" for c in configs if not c.get("placeholder") for p in c["problems"]]
    summary = summarize(configs)
    precisions = sorted({r["data"].get("precision", "bf16") for r in runs})
    if len(precisions) > 1:
        problems.append(f"matrix: runs of several precisions merged together: {', '.join(precisions)}")
    result = {"schema": "xstage.moe_matrix", "version": 1, "precision": "+".join(precisions) or None,
              "created_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "source_dir": os.path.abspath(out_dir),
              "regret_definition": "t(choice) / min(t_wave, t_interleaved) - 1, medians of layer time",
              "speedup_definition": "interleaved vs wave = median t_wave / median t_interleaved",
              "planned_runs": [planned[k] for k in sorted(planned)],
              "configurations": configs, "summary": summary, "problems": problems,
              "runs": [{"index": r["index"], "file": r["file"], "manifest": r["manifest"], "result": r["data"]}
                       for r in runs]}
    with open(result_json, "w") as f:
        json.dump(result, f, indent=1)
    with open(table_md, "w") as f:
        f.write(table_markdown(configs, summary, problems, out_dir, "+".join(precisions) or "unknown precision"))
    if png and configs:
        plot(configs, png, "+".join(precisions) or "unknown precision")
    print(f"moe_matrix_merge: {len(runs)} runs, {len(configs)} configurations "
          f"({summary['in_summary']} in the summary), "
          f"{len(problems)} problems -> {result_json}, {table_md}" + (f", {png}" if png and configs else ""))
    return 0 if runs else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
