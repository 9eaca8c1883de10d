#!/usr/bin/env python3
"""Per-call overhead of xstage.attention from Python against the kernel's own time.

For each sequence length S (S_q = S_kv): N back-to-back eager calls timed with CUDA events (GPU time
per call with whatever the host adds between launches), the same N calls captured in one CUDA graph and
replayed (the kernels' own time, no launch cost), and the host time per call of the eager fast path and
of the custom-op dispatcher path (perf_counter around N calls that only enqueue; N stays well below the
launch queue's depth, so the host never waits for the GPU), and the host time of each piece of an eager
call (BREAKDOWN: allocation, the Python description, the C ABI's checks, the C ABI's call on a prepared
struct, and a small PyTorch launch for reference). Writes JSON with provenance and raw samples.

    python3 bench/python/attn_overhead.py --out results/attn_overhead.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from provenance import provenance  # noqa: E402



def median(xs):
    return statistics.median(xs) if xs else None


def time_events(torch, fn, calls: int, samples: int) -> list[float]:
    """GPU microseconds per call of `calls` back-to-back fn() calls, once per sample."""
    per_call = []
    for _ in range(samples):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        stop.record()
        stop.synchronize()
        per_call.append(start.elapsed_time(stop) * 1e3 / calls)
    return per_call


def time_host(torch, fn, calls: int, samples: int) -> list[float]:
    """Host microseconds per call to enqueue `calls` fn() calls (the GPU drains between samples)."""
    per_call = []
    for _ in range(samples):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        per_call.append((t1 - t0) * 1e6 / calls)
    torch.cuda.synchronize()
    return per_call


def time_graph(torch, fn, calls: int, samples: int) -> list[float]:
    """GPU microseconds per call of the same calls replayed from one CUDA graph."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    per_call = []
    for _ in range(samples):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        stop.record()
        stop.synchronize()
        per_call.append(start.elapsed_time(stop) * 1e3 / calls)
    del graph
    return per_call


# Pieces of one eager call (host microseconds per call), so a total above the goal shows where it goes:
BREAKDOWN = {
    "outputs_host_us": "allocating out (the eager path's _outputs)",
    "python_prepare_host_us": "Python: describing q, k, v, out and the stream in the call struct (_prepare)",
    "native_check_host_us": "C ABI: every check, without the launch (xstage_attention_check)",
    "native_call_host_us": "C ABI on a prepared struct: checks, TMA descriptors, launch (xstage_attention_forward_call)",
    "torch_launch_host_us": "reference: one small PyTorch kernel launch (zero_ on 1 element)",
}


def host_breakdown(torch, q, k, v, calls: int, samples: int) -> dict:
    """Host time of each piece of the eager path (BREAKDOWN) on the same tensors."""
    from xstage import _native
    from xstage import _torch_attention as ta

    out, _ = ta._outputs(q, False)
    address = ta._prepare(q, k, v, out, None, 0.0)
    slots = ta._slots()[0]
    lib = _native.lib()
    check = lib.xstage_attention_check
    addrs = [s.address for s in slots[:4]]
    if check(*addrs, None, 0.0) != _native.OK or lib.xstage_attention_forward_call(address) != _native.OK:
        raise RuntimeError(f"attn_overhead: the prepared call fails: {lib.xstage_last_error().decode()}")
    small = torch.zeros(1, device=q.device)
    pieces = {
        "outputs_host_us": lambda: ta._outputs(q, False),
        "python_prepare_host_us": lambda: ta._prepare(q, k, v, out, None, 0.0),
        "native_check_host_us": lambda: check(addrs[0], addrs[1], addrs[2], addrs[3], None, 0.0),
        "native_call_host_us": lambda: lib.xstage_attention_forward_call(address),
        "torch_launch_host_us": small.zero_,
    }
    assert set(pieces) == set(BREAKDOWN)
    result = {key: time_host(torch, fn, calls, samples) for key, fn in pieces.items()}
    ta._prepare(q, k, v, out, None, 0.0)   # the struct described these tensors throughout
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="JSON file to write (not replaced without --force)")
    parser.add_argument("--force", action="store_true", help="replace --out if it exists")
    parser.add_argument("--seq", type=int, nargs="+", default=[1024, 2048, 4096], help="S_q = S_kv values")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=24)
    parser.add_argument("--head-dim", type=int, default=128, choices=[64, 128])
    parser.add_argument("--calls", type=int, default=200, help="calls per sample (below the launch queue depth)")
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--device", type=int, default=0)
    args = parser.parse_args()
    for name in ("batch", "heads", "calls", "samples"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} {getattr(args, name)}: must be at least 1")
    if any(s < 1 for s in args.seq):
        parser.error(f"--seq {args.seq}: every value must be at least 1")
    if os.path.exists(args.out) and not args.force:
        parser.error(f"--out {args.out}: exists (pass --force to replace it)")

    try:
        import torch
    except ImportError:
        print("attn_overhead: needs torch (with CUDA)", file=sys.stderr)
        return 1
    import xstage

    if not torch.cuda.is_available():
        print("attn_overhead: no CUDA GPU", file=sys.stderr)
        return 1
    torch.cuda.set_device(args.device)
    bf16 = torch.bfloat16
    results = []
    for s in args.seq:
        shape = (args.batch, s, args.heads, args.head_dim)
        q, k, v = (torch.randn(shape, device="cuda").to(bf16) for _ in range(3))
        eager = lambda: xstage.attention(q, k, v)  # noqa: E731
        dispatcher = lambda: torch.ops.xstage.attention(q, k, v, 0.0, False)  # noqa: E731
        for fn in (eager, dispatcher):
            for _ in range(10):
                fn()
        torch.cuda.synchronize()
        row = {
            "seq": s, "batch": args.batch, "heads": args.heads, "head_dim": args.head_dim, "calls": args.calls,
            "eager_gpu_us": time_events(torch, eager, args.calls, args.samples),
            "graph_gpu_us": time_graph(torch, eager, args.calls, args.samples),
            "eager_host_us": time_host(torch, eager, args.calls, args.samples),
            "dispatcher_host_us": time_host(torch, dispatcher, args.calls, args.samples),
            "empty_host_us": time_host(torch, lambda: torch.empty(shape, dtype=bf16, device="cuda"), args.calls,
                                       args.samples),
        }
        row.update(host_breakdown(torch, q, k, v, args.calls, args.samples))
        for key in ("eager_gpu_us", "graph_gpu_us", "eager_host_us", "dispatcher_host_us", "empty_host_us",
                    *BREAKDOWN):
            row[key + "_median"] = median(row[key])
        row["exposed_overhead_us_median"] = row["eager_gpu_us_median"] - row["graph_gpu_us_median"]
        row["tflops_graph"] = 4.0 * args.batch * args.heads * s * s * args.head_dim / (row["graph_gpu_us_median"] * 1e6)
        results.append(row)
        del q, k, v
    doc = {"schema": "xstage.bench.attn_overhead/2", "provenance": provenance(torch, args.device),
           "goal_eager_host_us_per_call": 5.0, "breakdown": BREAKDOWN, "results": results}
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=2)
    os.replace(tmp, args.out)
    print(f"{'S':>6} {'eager GPU us':>13} {'graph GPU us':>13} {'exposed us':>11} {'host us/call':>13} "
          f"{'dispatcher us':>14} {'torch.empty us':>15} {'TFLOP/s':>8}")
    for r in results:
        print(f"{r['seq']:>6} {r['eager_gpu_us_median']:>13.2f} {r['graph_gpu_us_median']:>13.2f} "
              f"{r['exposed_overhead_us_median']:>11.2f} {r['eager_host_us_median']:>13.2f} "
              f"{r['dispatcher_host_us_median']:>14.2f} {r['empty_host_us_median']:>15.2f} {r['tflops_graph']:>8.1f}")
    print("host us/call, pieces: " + ", ".join(BREAKDOWN))
    for r in results:
        print(f"{r['seq']:>6} " + " ".join(f"{r[key + '_median']:>8.2f}" for key in BREAKDOWN))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
