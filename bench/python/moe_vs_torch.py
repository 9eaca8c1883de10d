#!/usr/bin/env python3
"""xstage.FusedMoE (one GPU, EP = 1: every expert of the shape on this GPU, as `xstage moe bench --gpus 0`)
against the same layer in plain PyTorch, for every built-in MoE shape, bf16 and FP8, T tokens (default
16,384) with balanced routing.

PyTorch layer: argsort permutation of the routing slots, index_select gather, torch._grouped_mm for both
linears (bf16), SwiGLU in float32 rounded to bf16, index_add_ combine in float32. FP8: the same with
torch._scaled_grouped_mm, which takes row-wise scales only (one per token row of the activations, one per
output channel of each expert's weights), not the fused kernel's 128-channel activation groups and
128 x 128 weight blocks: the two FP8 layers quantize differently, so each is checked against the bf16
PyTorch layer, not against the other. Activation quantization is timed (it is part of the layer), weight
quantization is not.

Before timing, every pair is checked (bf16: relative L2 difference below 1e-2; FP8: each within 0.12
of the bf16 PyTorch layer, see FP8_LIMIT); then the two are timed alternately with CUDA events, medians reported.
JSON (provenance, raw samples) to --out; a table on stdout. Exit code 1 when a check failed.

    python bench/python/moe_vs_torch.py --out results/h200/moe_vs_torch.json
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import xstage
from xstage import moe

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from provenance import provenance  # noqa: E402

E4M3_MAX = 448.0
# FP8 against the bf16 layer: e4m3 keeps 3 mantissa bits (relative rounding error about 2.4% RMS per value),
# and x, W1, the SwiGLU output and W2 are each quantized, so a right FP8 layer lands some 5% from the bf16
# one on random data; a wrong one (a misplaced scale, a wrong expert) lands near 100%.
FP8_LIMIT = 0.12


# --- the PyTorch layer ------------------------------------------------------------------------------

def permutation(ids, experts):
    """Slots sorted by expert (stable), their tokens, and the grouped GEMMs' cumulative row offsets."""
    k = ids.shape[1]
    flat = ids.reshape(-1)
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=experts)
    offs = torch.cumsum(counts, 0, dtype=torch.int32)
    return order, order // k, offs


def swiglu_bf16(h):
    inter = h.shape[1] // 2
    return (F.silu(h[:, :inter].float()) * h[:, inter:].float()).bfloat16()


def combine(o, wts, order, token, tokens):
    o = o.float() * wts.reshape(-1)[order].unsqueeze(1)
    return torch.zeros(tokens, o.shape[1], device=o.device).index_add_(0, token, o).bfloat16()


def torch_bf16(x, ids, wts, w1t, w2t):
    order, token, offs = permutation(ids, w1t.shape[0])
    h = torch._grouped_mm(x.index_select(0, token), w1t, offs=offs)
    o = torch._grouped_mm(swiglu_bf16(h), w2t, offs=offs)
    return combine(o, wts, order, token, x.shape[0])


def torch_bf16_loop(x, ids, wts, w1t, w2t):
    """The same layer with one torch.matmul per expert (a fallback where torch._grouped_mm is missing or
    refuses the group sizes): the per-expert row counts come to the host once per call."""
    order, token, offs = permutation(ids, w1t.shape[0])
    xs = x.index_select(0, token)
    ends = offs.tolist()
    o = torch.empty(xs.shape[0], w2t.shape[2], dtype=torch.bfloat16, device=x.device)
    begin = 0
    for e, end in enumerate(ends):
        if end > begin:
            o[begin:end] = swiglu_bf16(xs[begin:end] @ w1t[e]) @ w2t[e]
        begin = end
    return combine(o, wts, order, token, x.shape[0])


def first_line(e: Exception) -> str:
    return f"{type(e).__name__}: {e}".splitlines()[0]


def quant_rowwise(a):
    """One scale per row (amax / 448), e4m3 values; returned as (uint8 bytes, scales)."""
    s = (a.abs().amax(dim=1).float() / E4M3_MAX).clamp_min(1e-12)
    q = (a.float() / s.unsqueeze(1)).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return q, s


def torch_fp8(x, ids, wts, w1q_t, s1, w2q_t, s2):
    order, token, offs = permutation(ids, w1q_t.shape[0])
    xq, sx = quant_rowwise(x)
    xs = xq.view(torch.uint8).index_select(0, token).view(torch.float8_e4m3fn)
    h = torch._scaled_grouped_mm(xs, w1q_t, sx.index_select(0, token), s1, offs=offs, out_dtype=torch.bfloat16)
    aq, sa = quant_rowwise(swiglu_bf16(h))
    o = torch._scaled_grouped_mm(aq, w2q_t, sa, s2, offs=offs, out_dtype=torch.bfloat16)
    return combine(o, wts, order, token, x.shape[0])


def quant_weights_rowwise(w):
    """[E, N, K] bf16 -> e4m3 [E, N, K] with one scale per (expert, output channel) [E, N], expert by expert
    (no full-size float32 temporaries)."""
    q = torch.empty(w.shape, dtype=torch.float8_e4m3fn, device=w.device)
    s = torch.empty(w.shape[:2], dtype=torch.float32, device=w.device)
    for e in range(w.shape[0]):
        q[e], s[e] = quant_rowwise(w[e])
    return q, s


# --- inputs -----------------------------------------------------------------------------------------

def balanced_routing(tokens, experts, top_k, gen):
    """Every expert gets tokens*top_k/experts slots (+-1), distinct experts per token: token t (in a random
    order) takes experts perm[(t*top_k + j) % experts]."""
    dev = torch.device("cuda", 0)
    perm = torch.randperm(experts, device=dev, generator=gen)
    rows = torch.randperm(tokens, device=dev, generator=gen)
    slot = rows.unsqueeze(1) * top_k + torch.arange(top_k, device=dev)
    ids = perm[slot % experts].to(torch.int32)
    wts = torch.softmax(torch.randn(tokens, top_k, device=dev, generator=gen), dim=1)
    return ids, wts


def rel_l2(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


def time_pair(fns, warmup, iters):
    """Alternating CUDA-event timings of each fn (ms per call), after `warmup` untimed rounds."""
    for _ in range(warmup):
        for f in fns:
            f()
    samples = [[] for _ in fns]
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in fns]
    for _ in range(iters):
        for i, f in enumerate(fns):
            begin, end = events[i]
            begin.record()
            f()
            end.record()
            end.synchronize()
            samples[i].append(begin.elapsed_time(end))
    return samples


def summary(samples, flops):
    med = statistics.median(samples)
    return {"median_ms": med, "min_ms": min(samples), "max_ms": max(samples), "tflops": flops / (med * 1e-3) / 1e12,
            "samples_ms": samples}


def bench_shape(shape, args, gen):
    name, hidden, inter, experts, top_k = (shape[k] for k in ("name", "hidden", "h_inter", "experts", "top_k"))
    tokens = args.tokens
    dev = torch.device("cuda", 0)
    flops = 6.0 * tokens * top_k * hidden * inter  # 2*rows*hidden*2*h_inter + 2*rows*h_inter*hidden
    base = {"shape": name, "hidden": hidden, "h_inter": inter, "experts": experts, "top_k": top_k, "tokens": tokens,
            "routing": "balanced", "flops": flops}
    out = []
    x = torch.randn(tokens, hidden, device=dev, generator=gen).bfloat16()
    ids, wts = balanced_routing(tokens, experts, top_k, gen)
    # In place: the largest shapes' weights take tens of GB, so no full-size temporaries.
    w1 = torch.randn(experts, 2 * inter, hidden, device=dev, generator=gen, dtype=torch.bfloat16).mul_(hidden ** -0.5)
    w2 = torch.randn(experts, hidden, inter, device=dev, generator=gen, dtype=torch.bfloat16).mul_(inter ** -0.5)

    # bf16
    layer = xstage.FusedMoE(w1, w2, top_k=top_k, max_tokens=tokens, schedule=args.schedule)
    w1t, w2t = w1.transpose(1, 2), w2.transpose(1, 2)  # [E, K, N] column-major views: the grouped GEMMs' B
    row = dict(base, precision="bf16", schedule=args.schedule, info=layer.info())
    torch_fn = functools.partial(torch_bf16, x, ids, wts, w1t, w2t)
    row["torch_impl"] = "torch._grouped_mm (bf16), argsort permutation, index_add_ combine"
    try:
        ref = torch_fn()
    except (RuntimeError, NotImplementedError, AttributeError) as e:
        row["torch_grouped_mm_unavailable"] = first_line(e)
        torch_fn = functools.partial(torch_bf16_loop, x, ids, wts, w1t, w2t)
        row["torch_impl"] = "one torch.matmul per expert (torch._grouped_mm unavailable), index_add_ combine"
        ref = torch_fn()
    y = layer(x, ids, wts)
    err = rel_l2(y, ref)
    row["check"] = {"rel_l2_fused_vs_torch": err, "limit": 1e-2, "passed": err < 1e-2}
    if row["check"]["passed"]:
        f_s, t_s = time_pair([functools.partial(layer, x, ids, wts), torch_fn], args.warmup, args.iters)
        row["fused"], row["torch"] = summary(f_s, flops), summary(t_s, flops)
        row["speedup"] = row["torch"]["median_ms"] / row["fused"]["median_ms"]
    row["info"] = layer.info()  # after the runs: the order the schedule ran (auto: its choice)
    out.append(row)
    del layer, y, torch_fn
    torch.cuda.empty_cache()

    # FP8
    q1, s1 = xstage.quantize_fp8_blocks(w1)
    q2, s2 = xstage.quantize_fp8_blocks(w2)
    r1, rs1 = quant_weights_rowwise(w1)
    r2, rs2 = quant_weights_rowwise(w2)
    del w1, w2, w1t, w2t
    torch.cuda.empty_cache()
    layer = xstage.FusedMoE(q1, q2, top_k=top_k, precision="fp8", w1_scale=s1, w2_scale=s2, max_tokens=tokens,
                            schedule=args.schedule)
    y = layer(x, ids, wts)
    err_fused = rel_l2(y, ref)
    row = dict(base, precision="fp8", schedule=args.schedule, info=layer.info(),
               quantization={"fused": "activations per token per 128 channels, weights per 128x128 block",
                             "torch": "row-wise: per token row, per expert output channel (torch._scaled_grouped_mm)"})
    torch_fp8_fn = functools.partial(torch_fp8, x, ids, wts, r1.transpose(1, 2), rs1, r2.transpose(1, 2), rs2)
    try:
        yt = torch_fp8_fn()
        err_torch = rel_l2(yt, ref)
        torch_error = None
    except (RuntimeError, NotImplementedError, AttributeError) as e:
        err_torch, torch_error = None, first_line(e)
    row["check"] = {"rel_l2_fused_fp8_vs_torch_bf16": err_fused, "rel_l2_torch_fp8_vs_torch_bf16": err_torch,
                    "limit": FP8_LIMIT,
                    "passed": err_fused < FP8_LIMIT and (err_torch is None or err_torch < FP8_LIMIT)}
    if torch_error:
        row["torch_unavailable"] = torch_error
    if row["check"]["passed"]:
        fns = [functools.partial(layer, x, ids, wts)] + ([] if torch_error else [torch_fp8_fn])
        samples = time_pair(fns, args.warmup, args.iters)
        row["fused"] = summary(samples[0], flops)
        if not torch_error:
            row["torch"] = summary(samples[1], flops)
            row["torch_impl"] = "torch._scaled_grouped_mm (e4m3, row-wise scales), argsort permutation, index_add_"
            row["speedup"] = row["torch"]["median_ms"] / row["fused"]["median_ms"]
    row["info"] = layer.info()  # after the runs: the order the schedule ran (auto: its choice)
    out.append(row)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", type=int, default=16384)
    p.add_argument("--iters", type=int, default=15)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--schedule", default="auto", choices=sorted(moe.SCHEDULES),
                   help="the layer's schedule (default: the library's default, auto; info.order records what ran)")
    p.add_argument("--shapes", default="all", help="comma-separated built-in shape names (default: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="", help="JSON output file")
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("moe_vs_torch: needs a CUDA device", file=sys.stderr)
        return 2
    shapes = moe.builtin_shapes()
    if args.shapes != "all":
        wanted = args.shapes.split(",")
        unknown = [s for s in wanted if s not in {x["name"] for x in shapes}]
        if unknown:
            print(f"moe_vs_torch: --shapes: unknown {unknown} (known: {[x['name'] for x in shapes]})", file=sys.stderr)
            return 2
        shapes = [s for s in shapes if s["name"] in wanted]
    gen = torch.Generator(device="cuda").manual_seed(args.seed)
    t0 = time.time()
    results, skipped = [], []
    for shape in shapes:
        # Peak weight memory: the bf16 weights while both FP8 copies (block and row-wise, a byte each) are made.
        need = 4 * shape["experts"] * 3 * shape["h_inter"] * shape["hidden"]
        free, _ = torch.cuda.mem_get_info()
        if need > 0.85 * free:
            why = f"its weights need about {need / 2**30:.0f} GiB at the FP8 step, {free / 2**30:.0f} GiB free"
            print(f"moe_vs_torch: {shape['name']}: skipped: {why}", file=sys.stderr)
            skipped.append({"shape": shape["name"], "reason": why})
            continue
        results += bench_shape(shape, args, gen)
        torch.cuda.empty_cache()
    doc = {"schema": "xstage.bench.moe_vs_torch/1", "provenance": provenance(torch), "elapsed_s": time.time() - t0,
           "config": {"tokens": args.tokens, "iters": args.iters, "warmup": args.warmup, "schedule": args.schedule,
                      "seed": args.seed, "ep": 1, "timed": "one layer call each (CUDA events), alternating"},
           "results": results, "skipped": skipped}
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)
    print(f"{'shape':<20} {'prec':<5} {'fused ms':>9} {'TFLOP/s':>8} {'torch ms':>9} {'TFLOP/s':>8} {'speedup':>8}  check")
    failed = False
    for r in results:
        fused, tt = r.get("fused"), r.get("torch")
        failed |= not r["check"]["passed"]
        fmt = lambda s, key, w: f"{s[key]:>{w}.3f}" if s else f"{'-':>{w}}"  # noqa: E731
        check = "ok" if r["check"]["passed"] else "FAILED " + json.dumps(r["check"])
        if "torch_unavailable" in r:
            check += f" (torch fp8: {r['torch_unavailable']})"
        print(f"{r['shape']:<20} {r['precision']:<5} {fmt(fused, 'median_ms', 9)} {fmt(fused, 'tflops', 8)} "
              f"{fmt(tt, 'median_ms', 9)} {fmt(tt, 'tflops', 8)} "
              f"{(str(round(r['speedup'], 2)) + 'x') if 'speedup' in r else '-':>8}  {check}")
    print(f"elapsed {doc['elapsed_s']:.0f} s" + (f"; JSON: {args.out}" if args.out else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
