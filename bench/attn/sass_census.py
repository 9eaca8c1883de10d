#!/usr/bin/env python3
"""Instructions per opcode in a kernel's steady-state loop, from its SASS: no GPU needed.

A kernel whose softmax is issue-bound (the FP8 attention, docs/attn_fp8.md) is paid in instructions per key block;
this counts them in the binary, so a change to the loop can be weighed on the development machine before device
time is spent. The loop is the innermost one (a backward branch and its target) that holds a warpgroup GEMM
(HGMMA, QGMMA, IGMMA), or the offsets given with --range. Counts are static: a block that a forward branch skips
(e.g. the output rescale when no row max moved) is counted as if it ran.

Input: a `cuobjdump -sass` listing (plain or .xz), or an ELF binary, which is passed to `cuobjdump -sass` (on PATH;
the CUDA toolkit's, or PyPI's nvidia-cuda-cuobjdump, whose nvidia/cu13/bin holds it).
Usage:
  sass_census.py build/xstage --function 'attn_forward_kernel.*Lb1ELb1ELi1EEENS0_17AttnEpilogueLocal' [--json]
  sass_census.py listing.sass --function NAME_REGEX --range 4200,6d10
"""
import argparse
import collections
import json
import lzma
import re
import shutil
import subprocess
import sys

GMMA = re.compile(r"^[HQI]GMMA\.")
INSTR = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s*(.*?)\s*;")
BRANCH = re.compile(r"\bBRA\s+(?:`\(.*?\)\s*)?0x([0-9a-f]+)")
PREDICATE = re.compile(r"^@!?U?P[0-9T]\s+")


def fail(msg):
    print(f"sass_census: {msg}", file=sys.stderr)
    sys.exit(2)


def read_listing(path):
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as e:
        fail(f"input '{path}': {e.strerror}")
    if head == b"\x7fELF":
        tool = shutil.which("cuobjdump")
        if tool is None:
            fail(f"input '{path}' is a binary and cuobjdump is not on PATH (the CUDA toolkit's bin, or "
                 "`pip install nvidia-cuda-cuobjdump` and its nvidia/cu13/bin)")
        p = subprocess.run([tool, "-sass", path], capture_output=True, text=True)
        if p.returncode != 0:
            fail(f"cuobjdump -sass '{path}' failed: {p.stderr.strip()[:300]}")
        return p.stdout
    try:
        if path.endswith(".xz"):
            return lzma.open(path, "rt", errors="replace").read()
        return open(path, errors="replace").read()
    except (OSError, lzma.LZMAError) as e:
        fail(f"input '{path}': {e}")


def functions(text):
    """{name: [(offset, instruction text)]} in listing order."""
    out, name = {}, None
    for line in text.splitlines():
        if "Function : " in line:
            name = line.split("Function : ", 1)[1].strip()
            out[name] = []
        elif name is not None:
            m = INSTR.match(line)
            if m:
                out[name].append((int(m.group(1), 16), m.group(2)))
    return out


def opcode(text):
    return PREDICATE.sub("", text).split()[0]


def steady_loop(ins):
    """(lo, hi): the smallest [branch target, branch] span that contains a warpgroup GEMM, or None."""
    gmma = [a for a, t in ins if GMMA.match(opcode(t))]
    best = None
    for a, t in ins:
        m = BRANCH.search(t)
        if not m:
            continue
        target = int(m.group(1), 16)
        if target < a and any(target <= g <= a for g in gmma) and (best is None or a - target < best[1] - best[0]):
            best = (target, a)
    return best


def census(ins, lo, hi):
    body = [t for a, t in ins if lo <= a <= hi]
    return len(body), collections.Counter(opcode(t) for t in body)


def parse_range(text):
    try:
        lo, hi = (int(x, 16) for x in text.split(","))
    except ValueError:
        fail(f"--range: expected two hex offsets 'lo,hi', got '{text}'")
    if lo > hi:
        fail(f"--range: lo must not exceed hi, got '{text}'")
    return lo, hi


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input", help="cuobjdump -sass listing (.xz allowed) or an ELF binary")
    ap.add_argument("--function", required=True, help="regular expression searched in the mangled function names")
    ap.add_argument("--range", help="hex offsets 'lo,hi' of the region to count instead of the GEMM loop")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    a = ap.parse_args()
    try:
        pattern = re.compile(a.function)
    except re.error as e:
        fail(f"--function: not a regular expression ({e}): '{a.function}'")
    bounds = parse_range(a.range) if a.range else None
    funcs = functions(read_listing(a.input))
    if not funcs:
        fail(f"input '{a.input}': no 'Function :' sections (not a cuobjdump -sass listing of a CUDA binary)")
    chosen = [n for n in funcs if pattern.search(n)]
    if not chosen:
        fail(f"--function: '{a.function}' matches none of the {len(funcs)} functions, e.g. {sorted(funcs)[:3]}")
    report = []
    for name in chosen:
        ins = funcs[name]
        span = bounds or steady_loop(ins)
        if span is None:
            fail(f"{name}: no loop holds a warpgroup GEMM; give --range")
        total, counts = census(ins, *span)
        report.append({"function": name, "range": [f"{span[0]:04x}", f"{span[1]:04x}"], "instructions": total,
                       "opcodes": dict(counts.most_common())})
    if a.json:
        json.dump({"schema": "xstage.sass_census", "version": 1, "input": a.input, "functions": report}, sys.stdout,
                  indent=1)
        print()
        return
    for r in report:
        print(f"{r['function']}\n  loop {r['range'][0]}-{r['range'][1]}: {r['instructions']} instructions")
        for op, n in r["opcodes"].items():
            print(f"  {n:5d} {op}")


if __name__ == "__main__":
    main()
