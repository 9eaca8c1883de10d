#!/usr/bin/env python3
"""FP8 attention forward: xstage precision="fp8" beside xstage bf16, FlashAttention-4's Hopper forward (bf16),
PyTorch SDPA's cuDNN backend (bf16) and SageAttention's Triton kernel (INT8 QK, fp16 PV: `sageattention`
1.0.6, the 8-bit attention a DiT user installs with pip), same run, same machine.

Speed: every implementation timed like bench/attn/attn_vs_cudnn.py (warm-up of at least --warmup-s seconds,
one event pair per launch, inputs rotated over >= 3x the L2, median of the samples), the implementations
interleaved in two passes of opposite order. Our FP8 figure includes its quantization pre-pass (it is part of
every call), as SageAttention's includes its own quantization and K smoothing.

Accuracy: on the same inputs for every implementation, against an fp32 reference (PyTorch SDPA's math
backend in fp32, per head): cosine similarity and relative L1 (sum |x - ref| / sum |ref|), relative L2.
Inputs: N(0, 1); outlier channels (4 of 128 channels 16x larger in Q, K, V); a large per-channel mean on K
(standard deviation 8); peaked scores (Q, K of standard deviation 2); and the self-attention Q, K, V of a
diffusers Wan 2.1 transformer block with random weights (captured at its attention dispatch).

Writes one JSON (provenance, raw samples, per-distribution accuracy, the bars) and a plot.
"""
import argparse
import json
import math
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "common"))
sys.path.insert(0, here)
try:  # `replot` (CPU) needs neither torch nor a GPU
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import attn_vs_cudnn as base  # the timing loop, FA4 loader and FLOP count: one definition
    from provenance import PowerSampler, provenance
except ImportError:
    if sys.argv[1:2] != ["replot"]:
        raise

SHAPES = [(16384, 12), (32768, 12), (75600, 5), (118800, 3)]  # (seq, heads), d = 128; Wan 720p, HunyuanVideo 720p
IMPLS = ["xstage_fp8", "xstage_bf16", "fa4", "cudnn", "sage"]


def load_sage():
    try:
        from sageattention import sageattn
        from importlib.metadata import version
        info = {"available": True, "version": version("sageattention"), "kernel": "Triton (INT8 QK, fp16 PV)"}
    except Exception as e:  # noqa: BLE001 - any import failure leaves the peer out, with its reason
        return None, {"available": False, "error": f"{type(e).__name__}: {e}"[:400]}

    def call(q, k, v):
        # sageattn subtracts K's mean in place (smooth_k): give it its own copy so inputs stay as drawn.
        return sageattn(q, k.clone(), v, tensor_layout="NHD", is_causal=False)
    return call, info


def implementations(xstage, fa4_call, sage_call):
    """name -> callable on [B, S, H, D] bf16 tensors returning [B, S, H, D]."""
    def sdpa_cudnn(q, k, v):
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)
    calls = {"xstage_fp8": lambda q, k, v: xstage.attention(q, k, v, precision="fp8"),
             "xstage_bf16": lambda q, k, v: xstage.attention(q, k, v),
             "cudnn": sdpa_cudnn}
    if fa4_call is not None:
        calls["fa4"] = fa4_call
    if sage_call is not None:
        calls["sage"] = sage_call
    return calls


def draw(kind, b, s, h, d, gen):
    """q, k, v [B, S, H, D] bf16 of one synthetic distribution."""
    def n(sd=1.0):
        return torch.randn(b, s, h, d, device="cuda", generator=gen) * sd
    if kind == "normal":
        q, k, v = n(), n(), n()
    elif kind == "outlier_channels":
        q, k, v = n(), n(), n()
        for t in (q, k, v):
            t[..., [3, 40, 77, 120]] *= 16
    elif kind == "key_mean":
        q, k, v = n(), n(), n()
        k += 8 * torch.randn(1, 1, h, d, device="cuda", generator=gen)
    elif kind == "peaked":
        q, k, v = n(2.0), n(2.0), n()
    else:
        raise ValueError(kind)
    return tuple(t.to(torch.bfloat16).contiguous() for t in (q, k, v))


def wan_block_qkv(frames, height, width, gen_seed):
    """Self-attention q, k, v of one diffusers WanTransformer3DModel block (random weights, random latents and
    text), captured where the block calls diffusers' attention dispatch; or (None, reason)."""
    try:
        import diffusers
        from diffusers import WanTransformer3DModel
        import diffusers.models.transformers.transformer_wan as wan_mod
    except Exception as e:  # noqa: BLE001
        return None, f"diffusers not importable: {type(e).__name__}: {e}"[:300]
    torch.manual_seed(gen_seed)
    model = WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=12, attention_head_dim=128,
                                  in_channels=16, out_channels=16, text_dim=4096, freq_dim=256, ffn_dim=8960,
                                  num_layers=1, cross_attn_norm=True, qk_norm="rms_norm_across_heads",
                                  eps=1e-6).to("cuda", torch.bfloat16).eval()
    captured = []
    original = wan_mod.dispatch_attention_fn

    def capture(query, key, value, *args, **kwargs):
        if not captured:
            captured.append((query.detach().clone(), key.detach().clone(), value.detach().clone()))
        return original(query, key, value, *args, **kwargs)
    wan_mod.dispatch_attention_fn = capture
    try:
        latents = torch.randn(1, 16, frames, height, width, device="cuda", dtype=torch.bfloat16)
        text = torch.randn(1, 512, 4096, device="cuda", dtype=torch.bfloat16)
        with torch.no_grad():
            model(hidden_states=latents, timestep=torch.tensor([500], device="cuda"), encoder_hidden_states=text,
                  return_dict=False)
    finally:
        wan_mod.dispatch_attention_fn = original
    del model
    torch.cuda.empty_cache()
    if not captured:
        return None, "the block made no attention call"
    q, k, v = (t.contiguous() for t in captured[0])
    return (q, k, v), f"diffusers {diffusers.__version__} WanTransformer3DModel block 0 self-attention"


def accuracy(calls, q, k, v, heads_checked):
    """Every implementation on the same q, k, v vs the fp32 reference over the first heads_checked heads."""
    res = {}
    outs = {name: call(q, k, v) for name, call in calls.items()}
    torch.cuda.synchronize()
    acc = {name: {"num_l1": 0.0, "num_l2": 0.0, "dot": 0.0, "xx": 0.0} for name in outs}
    den_l1 = den_l2 = 0.0
    for hi in range(heads_checked):
        sl = (slice(None), slice(None), slice(hi, hi + 1))
        with sdpa_kernel([SDPBackend.MATH]):
            ref = F.scaled_dot_product_attention(*(t[sl].transpose(1, 2).float() for t in (q, k, v))).transpose(1, 2)
        den_l1 += ref.abs().sum().item()
        den_l2 += ref.pow(2).sum().item()
        for name, out in outs.items():
            o = out[sl].float()
            a = acc[name]
            if not torch.isfinite(o).all():
                a["non_finite"] = True
                continue
            d = o - ref
            a["num_l1"] += d.abs().sum().item()
            a["num_l2"] += d.pow(2).sum().item()
            a["dot"] += (o * ref).sum().item()
            a["xx"] += o.pow(2).sum().item()
        del ref
    for name, a in acc.items():
        if a.get("non_finite"):
            res[name] = {"non_finite": True}
            continue
        res[name] = {"cosine": a["dot"] / math.sqrt(a["xx"] * den_l2), "rel_l1": a["num_l1"] / den_l1,
                     "rel_l2": math.sqrt(a["num_l2"] / den_l2)}
    del outs
    torch.cuda.empty_cache()
    return res


def time_impl(call, s, h, iters, warmup):
    return base.time_torch(call, 1, s, h, 128, iters, warmup, bshd=True)


def plot(points, accuracy_rows, path, device_name):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13, 4.2))
    labels = {"xstage_fp8": "xstage FP8", "xstage_bf16": "xstage bf16", "fa4": "FlashAttention-4 (bf16)",
              "cudnn": "SDPA cuDNN (bf16)", "sage": "SageAttention 1 Triton (INT8 QK)"}
    xs = list(range(len(points)))
    width = 0.16
    for i, name in enumerate(IMPLS):
        ys = [p.get(name, {}).get("tflops", 0) for p in points]
        ax.bar([x + (i - 2) * width for x in xs], ys, width, label=labels[name])
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{p['shape']['seq']}x{p['shape']['heads']}" for p in points])
    ax.set_ylabel("TFLOP/s (4 B S^2 H D / time)")
    ax.set_title("Attention forward, d=128, non-causal, " + device_name)
    top = max([p.get(n, {}).get("tflops", 0) for p in points for n in IMPLS] or [1])
    ax.set_ylim(0, 1.3 * top)
    ax.legend(fontsize=7, loc="upper left", ncol=3)
    ax.grid(True, axis="y", alpha=0.3)
    dists = [r["distribution"] for r in accuracy_rows]
    for i, name in enumerate(["xstage_fp8", "xstage_bf16", "sage", "cudnn"]):
        ys = [r["results"].get(name, {}).get("rel_l1", float("nan")) for r in accuracy_rows]
        ax2.bar([x + (i - 1.5) * 0.2 for x in range(len(dists))], ys, 0.2, label=labels[name])
    ax2.axhline(3e-2, color="k", ls="--", lw=1, label="bar (rel L1 3e-2)")
    ax2.set_yscale("log")
    ax2.set_xticks(range(len(dists)))
    ax2.set_xticklabels(dists, rotation=20, fontsize=8)
    ax2.set_ylabel("relative L1 vs fp32 reference")
    ax2.set_title("Accuracy on the same inputs (lower is better)")
    ax2.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def replot(paths, out):
    """One figure from the JSONs of separate phases (the speed and the accuracy runs)."""
    points, rows, device = [], [], "?"
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        points += doc.get("points", [])
        rows += [r for r in doc.get("accuracy", []) if r.get("results")]
        device = (doc.get("provenance", {}).get("device") or {}).get("name") or device
    plot(points, rows, out, str(device))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "replot":  # attn_fp8.py replot OUT.png A.json [B.json ...] (CPU)
        replot(sys.argv[3:], sys.argv[2])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("--plot", required=True)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--warmup-s", type=float, default=0.3)
    ap.add_argument("--acc-seq", type=int, default=8192, help="sequence length of the synthetic accuracy inputs")
    ap.add_argument("--acc-heads", type=int, default=4)
    ap.add_argument("--wan", default="9,60,104", help="latent frames,height,width of the Wan block (0: skip)")
    ap.add_argument("--quick", action="store_true", help="first shape only, two distributions (smoke test)")
    ap.add_argument("--phases", default="accuracy,speed",
                    help="accuracy, speed or both (the GPU machine's carry limit may put FA4 and diffusers in "
                         "separate runs: each phase's JSON stands alone)")
    ap.add_argument("--git-revision", default=os.environ.get("XSTAGE_GIT_REVISION"))
    args = ap.parse_args()
    prov = provenance(torch, git_revision_given=args.git_revision, packages=("sageattention", "diffusers"))
    import xstage
    base.SAMPLER = PowerSampler()
    fa4_call, fa4_info = base.load_fa4()
    sage_call, sage_info = load_sage()
    print("FA4:", json.dumps(fa4_info), "\nsage:", json.dumps(sage_info), flush=True)
    calls = implementations(xstage, fa4_call, sage_call)

    # --- accuracy, same inputs for all ---
    gen = torch.Generator(device="cuda")
    seed = int.from_bytes(os.urandom(4), "little")
    gen.manual_seed(seed)
    phases = set(args.phases.split(","))
    if not phases <= {"accuracy", "speed"}:
        sys.exit(f"attn_fp8: --phases {args.phases!r}; accepted: accuracy, speed, or both comma-separated")
    dists = ["normal", "outlier_channels", "key_mean", "peaked"][: 2 if args.quick else None]
    if "accuracy" not in phases:
        dists = []
    accuracy_rows = []
    for kind in dists:
        q, k, v = draw(kind, 1, args.acc_seq, args.acc_heads, 128, gen)
        accuracy_rows.append({"distribution": kind, "shape": [1, args.acc_seq, args.acc_heads, 128],
                              "results": accuracy(calls, q, k, v, args.acc_heads)})
        print(kind, json.dumps(accuracy_rows[-1]["results"]), flush=True)
    if args.wan != "0" and not args.quick and "accuracy" in phases:
        f, hh, ww = (int(x) for x in args.wan.split(","))
        qkv, note = wan_block_qkv(f, hh, ww, seed)
        if qkv is None:
            accuracy_rows.append({"distribution": "wan_block", "error": note, "results": {}})
        else:
            q, k, v = qkv
            accuracy_rows.append({"distribution": "wan_block", "source": note, "shape": list(q.shape),
                                  "results": accuracy(calls, q, k, v, min(4, q.shape[2]))})
        print("wan_block", json.dumps(accuracy_rows[-1]), flush=True)

    # --- speed ---
    points = []
    for s, h in ([] if "speed" not in phases else SHAPES[:1] if args.quick else SHAPES):
        warmup = max(args.warmup, math.ceil(args.warmup_s * 800e12 / base.flops(1, s, h, 128)))
        order = [n for n in IMPLS if n in calls]
        runs = {n: [] for n in order}
        for pass_order in (order, order[::-1]):
            for name in pass_order:
                try:
                    runs[name].append(time_impl(calls[name], s, h, args.iters, warmup))
                except Exception as e:  # noqa: BLE001 - a peer failing at a shape is recorded, not fatal
                    runs[name].append({"error": f"{type(e).__name__}: {e}"[:300]})
        pt = {"shape": {"batch": 1, "seq": s, "heads": h, "head_dim": 128}}
        for name, rs in runs.items():
            ok = [r for r in rs if "samples_ms" in r]
            if not ok:
                pt[name] = {"error": rs[0].get("error")}
                continue
            samples = [x for r in ok for x in r["samples_ms"]]
            med = sorted(samples)[len(samples) // 2]
            pt[name] = {"median_ms": med, "tflops": base.flops(1, s, h, 128) / (med * 1e-3) / 1e12,
                        "passes": ok}
        if "median_ms" in pt.get("xstage_fp8", {}):
            for peer in ("xstage_bf16", "fa4", "cudnn", "sage"):
                if "median_ms" in pt.get(peer, {}):
                    pt[f"fp8_speedup_vs_{peer}"] = pt[peer]["median_ms"] / pt["xstage_fp8"]["median_ms"]
        points.append(pt)
        print(s, h, {n: round(pt[n].get("tflops", float("nan")), 1) for n in order},
              {k: round(v, 3) for k, v in pt.items() if k.startswith("fp8_speedup")}, flush=True)

    big = [p for p in points if p["shape"]["seq"] >= 16384]
    summary = {} if not big else {
        "bar_speedup_vs_xstage_bf16_ge_1_5": all(p.get("fp8_speedup_vs_xstage_bf16", 0) >= 1.5 for p in big),
        "bar_speedup_vs_fa4_ge_1_3": fa4_call is not None and all(p.get("fp8_speedup_vs_fa4", 0) >= 1.3 for p in big),
        "min_speedup_vs_xstage_bf16": min((p.get("fp8_speedup_vs_xstage_bf16", 0) for p in big), default=None),
        "min_speedup_vs_fa4": min((p.get("fp8_speedup_vs_fa4", 0) for p in big), default=None)}
    if accuracy_rows:
        summary |= {
        "accuracy_bar_cosine_ge_0_999": all(r["results"].get("xstage_fp8", {}).get("cosine", 0) >= 0.999
                                            for r in accuracy_rows if r["results"]),
        "accuracy_bar_rel_l1_le_3e-2": all(r["results"].get("xstage_fp8", {}).get("rel_l1", 1) <= 3e-2
                                           for r in accuracy_rows if r["results"]),
    }
    out = {"schema": "xstage.attn_fp8_bench", "version": 1, "phases": sorted(phases), "provenance": prov, "seed": seed,
           "fa4": fa4_info, "sage": sage_info, "accuracy": accuracy_rows, "points": points, "summary": summary}
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)
    # An empty phase leaves its panel empty; `attn_fp8.py replot` draws both phases' JSONs in one figure.
    plot(points, [r for r in accuracy_rows if r["results"]], args.plot, torch.cuda.get_device_name(0))
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
