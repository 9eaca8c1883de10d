"""Merges the per-point JSON of `xstage attn ulysses` and the PyTorch baseline into one results file and
Table-3-like markdown tables (sender-side boundary, medians).
  python3 bench/ulysses/ulysses_merge.py POINTS_DIR|SWEEP_JSON OUT_JSON OUT_MD
POINTS_DIR holds ulysses_*.json, one_gpu_*.json and torch.json (bench/ulysses/ulysses_sweep.sh); a
SWEEP_JSON is an earlier merged file (schema xstage.ulysses_sweep/1, e.g. results/h200-x2/ulysses/ulysses.json)
whose tables are printed again. Tables: times per variant; metrics per piggyback epilogue (E_res, H and
speedup vs both serials); the completion-coupled slope test per like-for-like pair beside the model's
E_cc; the TMA pair like for like (against fa-only-tma and serial-tma: the same kernel storing locally);
the cuDNN + NCCL comparison; paired differences. Variants are read where present: the staged and direct
epilogues (fused, fused-direct, completion-coupled; pruned, docs/ulysses_notes.md) appear only in
tables of runs that measured them, and a variant missing from a point prints as "-".
"""
import glob, json, math, os, random, statistics, sys

SWEEP_SCHEMA = "xstage.ulysses_sweep/1"


def fail(msg):
    print(f"ulysses_merge: {msg}", file=sys.stderr)
    sys.exit(2)


if len(sys.argv) != 4:
    fail("usage: ulysses_merge.py POINTS_DIR|SWEEP_JSON OUT_JSON OUT_MD")
src, out_json, out_md = sys.argv[1:4]
if os.path.realpath(out_json) == os.path.realpath(src):
    fail(f"OUT_JSON '{out_json}' is the input; write the merged file elsewhere")


def load(f):
    try:
        with open(f) as fh:
            return json.load(fh)
    except (OSError, ValueError) as e:
        fail(f"{f}: {e}")


if os.path.isdir(src):
    points = [load(f) for f in sorted(glob.glob(os.path.join(src, "ulysses_*.json")))]
    torch_res = load(os.path.join(src, "torch.json")) if os.path.exists(os.path.join(src, "torch.json")) else None
    one_gpu = [load(f) for f in sorted(glob.glob(os.path.join(src, "one_gpu_*.json")))]
elif os.path.isfile(src):
    sweep = load(src)
    if not isinstance(sweep, dict) or sweep.get("schema") != SWEEP_SCHEMA or not isinstance(sweep.get("points"), list):
        fail(f"{src}: schema: expected a \"{SWEEP_SCHEMA}\" object with a points array")
    points, torch_res, one_gpu = sweep["points"], sweep.get("torch_baseline"), sweep.get("one_gpu_diagnostic") or []
else:
    fail(f"POINTS_DIR|SWEEP_JSON '{src}': no such directory or file")
if not points:
    fail(f"{src}: no ulysses points")
ORDER_RANK = {"own-last": 0, "remote-first": 1}
points.sort(key=lambda p: (p.get("precision", "bf16") != "bf16", bool(p.get("cuda_graph")),
                           ORDER_RANK.get(p.get("tile_order", ""), 2), p["heads_per_gpu"] != 4, p["seq_total"]))
with open(out_json, "w") as fh:
    json.dump({"schema": SWEEP_SCHEMA, "points": points, "torch_baseline": torch_res,
               "one_gpu_diagnostic": one_gpu}, fh, indent=1)


def present(v):
    """Whether any point measured variant v (the pruned ones only in runs made before the pruning)."""
    return any(v in p.get("variants", {}) for p in points + one_gpu)


NAN = float("nan")
# The variants `xstage attn ulysses --variant all` runs: always a column, "-" where a point lacks one.
KEPT = ["fa-only", "a2a-ours", "a2a-nccl", "serial-ours", "serial-nccl", "fused-tma", "coupled-tma", "fa-only-tma",
        "serial-tma"]
# Piggyback epilogues (label, variant) and like-for-like (piggyback, completion-coupled) pairs per store path.
FUSED = [(l, v) for l, v in [("staged", "fused"), ("direct", "fused-direct"), ("TMA bulk", "fused-tma")] if present(v)]
PAIRS = [(l, f, c) for l, f, c in [("staged", "fused", "completion-coupled"), ("TMA bulk", "fused-tma", "coupled-tma")]
         if present(f) or present(c)]


def tq(m, h, t):
    if not torch_res:
        return None
    for p in torch_res["points"]:
        if p["seq_image"] == m and p["heads_per_gpu"] == h and p["seq_text"] == t:
            return p
    return None


def us(p, v, b="sender"):
    x = p["variants"].get(v)
    return x[f"{b}_median_us"] if x else NAN


def met(p, v, key):
    return p["metrics"]["sender"].get(v, {}).get(key, NAN)


def name(p):
    return f'{p["seq_image"]}' + (f' (+{p["seq_text"]})' if p["seq_text"] else "") + f' x {p["heads_per_gpu"]}' + \
        ("" if p.get("tile_order") == "own-last" else f' ({p.get("tile_order", "natural")})') + \
        (" (CUDA graph)" if p.get("cuda_graph") else "") + \
        (f' ({p["precision"]})' if p.get("precision", "bf16") != "bf16" else "")


def f1(x):
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.1f}"


def f3(x):
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def pct(x):
    """x (a fraction) in percent with its unit; "-" where not measured."""
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.2f} %"


def table(fh, hdr, rows):
    fh.write("| " + " | ".join(hdr) + " |\n|" + "---|" * len(hdr) + "\n")
    for r in rows:
        fh.write("| " + " | ".join(r) + " |\n")
    fh.write("\n")


def paired(p, v):
    """Median of (variant - fa-only) over the samples of the same iteration round."""
    a = p["variants"].get("fa-only", {}).get("sender_samples_us")
    b = p["variants"].get(v, {}).get("sender_samples_us")
    if not a or not b:
        return NAN
    d = sorted(y - x for x, y in zip(a, b))
    n = len(d)
    return d[n // 2] if n % 2 else 0.5 * (d[n // 2 - 1] + d[n // 2])


def paired_ci(p, a, b, draws=400):
    """Median of (b - a) over the samples of the same iteration round and a 90 % bootstrap interval."""
    va, vb = p["variants"].get(a, {}).get("sender_samples_us"), p["variants"].get(b, {}).get("sender_samples_us")
    if not va or not vb:
        return NAN, NAN, NAN
    d = [y - x for x, y in zip(va, vb)]
    rng = random.Random(12345)
    bs = sorted(statistics.median(rng.choices(d, k=len(d))) for _ in range(draws))
    return statistics.median(d), bs[int(0.05 * draws)], bs[int(0.95 * draws) - 1]


with open(out_md, "w") as fh:
    fh.write("Times in us, medians, sender-side boundary (see docs/ulysses_notes.md). M x heads per GPU.\n\n")
    vs = [v for v in ["fa-only", "fa-only-tma", "a2a-ours", "a2a-nccl", "serial-ours", "serial-tma", "serial-nccl",
                      "fused", "fused-direct", "fused-tma", "completion-coupled", "coupled-tma"]
          if present(v) or v in KEPT]
    table(fh, ["point"] + vs + ["bit-identical"],
          [[name(p)] + [f1(us(p, v)) for v in vs] + ["yes" if p["check"]["bit_identical"] else "NO"] for p in points])

    fh.write(f"Metrics per piggyback epilogue ({' / '.join(l for l, _ in FUSED)}):\n\n")
    rows = []
    for p in points:
        fa = us(p, "fa-only")
        rows.append([name(p)] +
                    [" / ".join(f'{f1(met(p, v, "residual_us"))} ({pct(met(p, v, "residual_fraction_of_fa"))})'
                                for _, v in FUSED)] +
                    [" / ".join(f3(met(p, v, k)) for _, v in FUSED)
                     for k in ["hiding_ratio_vs_serial-ours", "hiding_ratio_vs_serial-nccl", "speedup_vs_serial-ours",
                               "speedup_vs_serial-nccl"]])
    table(fh, ["point", "E_res us (% FA)", "H vs serial ours", "H vs serial NCCL", "speedup vs serial ours",
               "speedup vs serial NCCL"], rows)

    fh.write("TMA bulk-store pair like for like: T_FA = fa-only-tma (the fused-tma kernel, every row stored "
             "locally), T_serial = serial-tma (fa-only-tma + a2a-ours); vs NCCL: T_serial = fa-only-tma + "
             "(serial-nccl - fa-only), derived.\n\n")
    rows = []
    for p in points:
        fat, st, fa, sn = us(p, "fa-only-tma"), us(p, "serial-tma"), us(p, "fa-only"), us(p, "serial-nccl")
        r = [name(p), f1(fat), f1(st)]
        for v in ["fused-tma", "coupled-tma"]:
            e = us(p, v) - fat
            h_ours = 1 - e / (st - fat)
            h_nccl = 1 - e / (sn - fa)
            r += [f"{f1(us(p, v))}", f"{f1(e)} ({pct(e / fat)})", f3(h_ours), f3(h_nccl), f3(st / us(p, v)),
                  f3((fat + sn - fa) / us(p, v))]
        rows.append(r)
    hdr = ["point", "fa-only-tma", "serial-tma"]
    for v in ["fused-tma", "coupled-tma"]:
        hdr += [v, "E_res us (% FA)", "H vs serial-tma", "H vs NCCL (derived)", "speedup vs serial-tma",
                "speedup vs NCCL (derived)"]
    table(fh, hdr, rows)

    fh.write("Slope test (eq. 17): completion-coupled residual vs piggyback residual, like for like per store path; "
             "us over FA-only. Model: G*, M_ub*, predicted E_cc (drain only, T_lat = 0).\n\n")
    rows = []
    for p in points:
        fa = us(p, "fa-only")
        mod = (p.get("model") or {}).get("summary", {})
        r = [name(p)]
        for _, f, c in PAIRS:
            base = us(p, "fa-only-tma") if f == "fused-tma" and not math.isnan(us(p, "fa-only-tma")) else fa
            r += [f1(us(p, f) - base), f1(us(p, c) - base), f1(us(p, c) - us(p, f))]
        r.append(f'{mod.get("G_star_us", NAN):.2f} / {mod.get("M_ub_star_tokens", "-")} / '
                 f'{mod.get("predicted_E_cc_us", NAN):.1f}')
        r.append(f1(mod.get("predicted_tail_drain_us")))
        rows.append(r)
    hdr = ["point"]
    for label, f, c in PAIRS:
        hdr += [f"{label}: {f} − FA", f"{c} − FA", f"{c} − {f}"]
    hdr[-3] += " (FA: fa-only-tma where measured)"
    table(fh, hdr + ["model G* us / M_ub* / E_cc us", "model tail drain us (final round's remote bytes / R)"], rows)

    if torch_res:
        fh.write(f'Against cuDNN SDPA + NCCL all_to_all_single (PyTorch {torch_res.get("torch")}, cuDNN '
                 f'{torch_res.get("cudnn")}, NCCL {torch_res.get("nccl")}; separate process, same device call):\n\n')
        rows = []
        for p in points:
            t = tq(p["seq_image"], p["heads_per_gpu"], p["seq_text"])
            if p.get("tile_order") == "natural" or p.get("precision", "bf16") != "bf16" or not t:  # torch: bf16
                continue
            measured = [v for _, v in FUSED if not math.isnan(us(p, v))]
            best = min(measured, key=lambda v: us(p, v)) if measured else None
            rows.append([name(p), f1(t["cudnn_sdpa_median_us"]), f1(us(p, "fa-only")), f1(t["nccl_a2a_median_us"]),
                         f1(t["serial_cudnn_nccl_median_us"]), f1(us(p, "fused-tma")),
                         f3(t["serial_cudnn_nccl_median_us"] / us(p, "fused-tma")),
                         f"{best} {f1(us(p, best))}" if best else "-",
                         f3(t["serial_cudnn_nccl_median_us"] / us(p, best)) if best else "-"])
        table(fh, ["point", "cuDNN SDPA", "our FA-only", "NCCL A2A (torch)", "cuDNN + NCCL serial", "fused-tma",
                   "ratio (fused-tma)", "our best fused", "ratio (best)"], rows)

    fh.write("TMA pair, paired per iteration round (median of the per-round differences, us, with a 90 % "
             "bootstrap interval; H from the paired medians, like for like: 1 - (fused - fa-only-tma) / "
             "(serial-tma - fa-only-tma)):\n\n")
    rows = []
    for p in points + one_gpu:
        pr = [("fa-only", "fa-only-tma"), ("fa-only-tma", "fused-tma"), ("fa-only-tma", "coupled-tma"),
              ("fused-tma", "coupled-tma")]
        if p["world"] > 1:
            pr.insert(0, ("fa-only-tma", "serial-tma"))
        got = {k: paired_ci(p, *k) for k in pr}
        r = [name(p), str(p["world"])]
        for k in [("fa-only-tma", "serial-tma"), ("fa-only", "fa-only-tma"), ("fa-only-tma", "fused-tma"),
                  ("fa-only-tma", "coupled-tma"), ("fused-tma", "coupled-tma")]:
            m, lo, hi = got.get(k, (NAN, NAN, NAN))
            r.append("-" if math.isnan(m) else f"{m:.1f} [{lo:.1f}, {hi:.1f}]")
        a2a = got.get(("fa-only-tma", "serial-tma"), (NAN,))[0]
        for k in [("fa-only-tma", "fused-tma"), ("fa-only-tma", "coupled-tma")]:
            r.append(f3(1 - got[k][0] / a2a) if not math.isnan(a2a) else "-")
        rows.append(r)
    table(fh, ["point", "GPUs", "serial-tma − fa-only-tma", "fa-only-tma − fa-only", "fused-tma − fa-only-tma",
               "coupled-tma − fa-only-tma", "coupled-tma − fused-tma", "H fused-tma (paired)",
               "H coupled-tma (paired)"], rows)

    fh.write("Paired medians of (variant - fa-only), us, same iteration round:\n\n")
    vs = [v for v in ["fa-only-tma", "serial-ours", "serial-tma", "serial-nccl", "fused", "fused-direct", "fused-tma",
                      "completion-coupled", "coupled-tma"] if present(v) or v in KEPT]
    rows = []
    for p in points + one_gpu:
        rows.append([name(p), str(p["world"])] + [f1(paired(p, v)) for v in vs])
    table(fh, ["point", "GPUs"] + vs, rows)
print(f"merged {len(points)} points")
