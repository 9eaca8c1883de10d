#!/usr/bin/env python3
"""Where a kernel's warps spend their time, by SASS address range, from Nsight Compute's per-instruction
warp-state samples.

Input: the CSV that `ncu -i REPORT --page source --csv --print-source sass` writes (plain or .xz), one row per
instruction with "Warp Stall Sampling (All Samples)" and one column per stall reason. Addresses are taken
relative to the function's first instruction, the offsets `cuobjdump -sass` prints.
Usage:
  ncu_sass_regions.py CSV --cuts 37b0,3930,... --names "K wait,turn wait,..."   (len(names) = len(cuts) - 1)
  ncu_sass_regions.py CSV --top 30 [--range 37b0,5890]                          (the most sampled instructions)
"""
import argparse
import collections
import csv
import io
import lzma
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"


def fail(msg):
    print(f"ncu_sass_regions: {msg}", file=sys.stderr)
    sys.exit(2)


def hex_offsets(text, arg):
    try:
        vals = [int(x, 16) for x in text.split(",")]
    except ValueError:
        fail(f"{arg}: expected comma-separated hex offsets, got '{text}'")
    if vals != sorted(vals) or len(set(vals)) != len(vals):
        fail(f"{arg}: offsets must increase, got '{text}'")
    return vals


def load(path):
    try:
        raw = lzma.open(path, "rt", errors="replace").read() if path.endswith(".xz") else open(path, errors="replace").read()
    except (OSError, lzma.LZMAError) as e:
        fail(f"CSV '{path}': {e}")
    rows = list(csv.reader(io.StringIO(raw)))
    hdr_i = next((i for i, r in enumerate(rows) if r and r[0] == "Address"), None)
    if hdr_i is None:
        fail(f"CSV '{path}': no header row starting with 'Address' (not an ncu --page source --csv export)")
    hdr = rows[hdr_i]
    if SAMPLES not in hdr or "Source" not in hdr:
        fail(f"CSV '{path}': columns '{SAMPLES}' and 'Source' missing")
    ix = {h: i for i, h in enumerate(hdr)}
    reasons = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
    data = [r for r in rows[hdr_i + 1:] if len(r) == len(hdr)]
    if not data:
        fail(f"CSV '{path}': no instruction rows")
    out = []
    for line, r in enumerate(data, start=hdr_i + 2):
        num = lambda h: float(r[ix[h]].replace(",", "") or 0)  # noqa: E731
        try:
            out.append((int(r[0], 16), r[ix["Source"]].strip(), num(SAMPLES), {h[6:]: num(h) for h in reasons}))
        except ValueError as e:
            fail(f"CSV '{path}', line {line}: not an address and sample counts ({e})")
    base = out[0][0]
    return [(addr - base, src, s, st) for addr, src, s, st in out]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--cuts", help="hex offsets bounding the regions")
    ap.add_argument("--names", help="comma-separated region names, one fewer than --cuts")
    ap.add_argument("--top", type=int, default=0, help="list the N most sampled instructions")
    ap.add_argument("--range", help="hex 'lo,hi': restrict --top to these offsets")
    a = ap.parse_args()
    if not a.cuts and not a.top:
        fail("give --cuts and --names, or --top N")
    if a.top < 0:
        fail(f"--top: must be >= 0, got {a.top}")
    if a.range and not a.top:
        fail("--range: only with --top N")
    lo, hi = 0, 1 << 62
    if a.range:
        bounds = hex_offsets(a.range, "--range")
        if len(bounds) != 2:
            fail(f"--range: expected two hex offsets 'lo,hi', got '{a.range}'")
        lo, hi = bounds
    ins = load(a.csv)
    total = sum(s for _, _, s, _ in ins)
    if total <= 0:
        fail(f"CSV '{a.csv}': no samples")
    if a.cuts:
        cuts = hex_offsets(a.cuts, "--cuts")
        names = (a.names or "").split(",")
        if len(names) != len(cuts) - 1:
            fail(f"--names: {len(cuts) - 1} names needed for {len(cuts)} cuts, got {len(names)}")
        agg = [[0, 0.0, collections.Counter()] for _ in names]
        for off, _, s, st in ins:
            for k in range(len(names)):
                if cuts[k] <= off < cuts[k + 1]:
                    agg[k][0] += 1
                    agg[k][1] += s
                    agg[k][2].update(st)
        in_regions = sum(g[1] for g in agg)
        print(f"{'region':30s} {'instr':>5s} {'% of regions':>12s}  top stall reasons (% of the region's samples)")
        for name, (n, s, st) in zip(names, agg):
            top = ", ".join(f"{k} {100 * v / s:.0f}" for k, v in st.most_common(4)) if s else "-"
            print(f"{name:30s} {n:5d} {100 * s / max(in_regions, 1):11.1f}%  {top}")
        print(f"regions hold {100 * in_regions / total:.1f}% of all {total:.0f} samples")
    if a.top:
        sel = sorted(((s, off, src, st) for off, src, s, st in ins if lo <= off <= hi), reverse=True)[:a.top]
        for s, off, src, st in sel:
            top = ", ".join(f"{k} {int(v)}" for k, v in sorted(st.items(), key=lambda x: -x[1])[:3])
            print(f"{100 * s / total:5.1f}% {off:05x} {src[:64]:64s} {top}")


if __name__ == "__main__":
    main()
