"""Merges the per-point JSON of `xstage attn ulysses` and the PyTorch baseline into one results file and
a Table-3-like markdown table (sender-side boundary, medians).
  python3 bench/ulysses_merge.py POINTS_DIR OUT_JSON OUT_MD
"""
import glob, json, os, sys

src, out_json, out_md = sys.argv[1:4]
points = []
for f in sorted(glob.glob(os.path.join(src, "ulysses_*.json"))):
    with open(f) as fh:
        points.append(json.load(fh))
points.sort(key=lambda p: (p.get("tile_order", "") != "own-last", p["heads_per_gpu"] != 4, p["seq_total"]))
torch_res = None
if os.path.exists(os.path.join(src, "torch.json")):
    with open(os.path.join(src, "torch.json")) as fh:
        torch_res = json.load(fh)
one_gpu = []
for f in sorted(glob.glob(os.path.join(src, "one_gpu_*.json"))):
    with open(f) as fh:
        one_gpu.append(json.load(fh))
with open(out_json, "w") as fh:
    json.dump({"schema": "xstage.ulysses_sweep/1", "points": points, "torch_baseline": torch_res,
               "one_gpu_diagnostic": one_gpu}, fh, indent=1)


def tq(m, h, t):
    if not torch_res:
        return None
    for p in torch_res["points"]:
        if p["seq_image"] == m and p["heads_per_gpu"] == h and p["seq_text"] == t:
            return p
    return None


def us(p, v, b="sender"):
    x = p["variants"].get(v)
    return x[f"{b}_median_us"] if x else float("nan")


hdr = ["M (+text)", "heads/GPU", "query order", "FA-only", "A2A ours", "A2A NCCL", "serial ours", "serial NCCL", "fused", "fused-direct", "compl.-coupled",
       "E_res (% FA)", "H vs serial ours", "H vs serial NCCL", "speedup vs ours", "speedup vs NCCL",
       "CC residual", "model G* / M_ub* / E_cc pred", "cuDNN SDPA", "cuDNN + NCCL serial", "fused vs cuDNN+NCCL", "bit-identical"]
rows = []
for p in points:
    fa, fu, cc = us(p, "fa-only"), us(p, "fused"), us(p, "completion-coupled")
    m = p["metrics"]["sender"].get("fused", {})
    mod = (p.get("model") or {}).get("summary", {})
    t = tq(p["seq_image"], p["heads_per_gpu"], p["seq_text"])
    # The PyTorch baseline is the same for both query orders: show it once, beside the default order.
    if p.get("tile_order") == "natural":
        t = None
    rows.append([
        f'{p["seq_image"]}' + (f' (+{p["seq_text"]})' if p["seq_text"] else ""), str(p["heads_per_gpu"]),
        p.get("tile_order", "natural"),
        f"{fa:.1f}", f'{us(p, "a2a-ours"):.1f}', f'{us(p, "a2a-nccl"):.1f}', f'{us(p, "serial-ours"):.1f}',
        f'{us(p, "serial-nccl"):.1f}', f"{fu:.1f}", f'{us(p, "fused-direct"):.1f}', f"{cc:.1f}",
        f'{m.get("residual_us", float("nan")):.1f} ({100 * m.get("residual_fraction_of_fa", float("nan")):.2f} %)',
        f'{m.get("hiding_ratio_vs_serial-ours", float("nan")):.3f}', f'{m.get("hiding_ratio_vs_serial-nccl", float("nan")):.3f}',
        f'{m.get("speedup_vs_serial-ours", float("nan")):.3f}', f'{m.get("speedup_vs_serial-nccl", float("nan")):.3f}',
        f"{cc - fa:.1f}",
        f'{mod.get("G_star_us", float("nan")):.2f} us / {mod.get("M_ub_star_tokens", "-")} / {mod.get("predicted_E_cc_us", float("nan")):.1f} us',
        f'{t["cudnn_sdpa_median_us"]:.1f}' if t else "-", f'{t["serial_cudnn_nccl_median_us"]:.1f}' if t else "-",
        f'{t["serial_cudnn_nccl_median_us"] / fu:.3f}' if t else "-",
        "yes" if p["check"]["bit_identical"] else "NO"])
with open(out_md, "w") as fh:
    fh.write("Times in us, medians, sender-side boundary (see docs/ulysses_notes.md).\n\n")
    fh.write("| " + " | ".join(hdr) + " |\n|" + "---|" * len(hdr) + "\n")
    for r in rows:
        fh.write("| " + " | ".join(r) + " |\n")
print(f"merged {len(points)} points")

# Paired differences (each variant's iteration beside the fa-only iteration it was interleaved with).
def paired(p, v):
    a, b = p["variants"]["fa-only"]["sender_samples_us"], p["variants"].get(v, {}).get("sender_samples_us")
    if not b:
        return float("nan")
    d = sorted(y - x for x, y in zip(a, b))
    n = len(d)
    return d[n // 2] if n % 2 else 0.5 * (d[n // 2 - 1] + d[n // 2])

with open(out_md, "a") as fh:
    fh.write("\nPaired medians of (variant - fa-only), us, same iteration round:\n\n")
    vs = ["serial-ours", "serial-nccl", "fused", "fused-direct", "completion-coupled"]
    fh.write("| point | GPUs | " + " | ".join(vs) + " |\n|" + "---|" * (len(vs) + 2) + "\n")
    for p in points + one_gpu:
        name = f'{p["seq_total"]}x{p["heads_per_gpu"]} {p.get("tile_order", "")}'
        fh.write(f'| {name} | {p["world"]} | ' + " | ".join(f"{paired(p, v):.1f}" for v in vs) + " |\n")
