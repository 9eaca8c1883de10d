#!/usr/bin/env python3
"""FP8 attention forward: xstage precision="fp8" beside the 8-bit attention kernels a DiT team would pick on Hopper
(cuDNN's FP8 SDPA through `nvidia-cudnn-frontend`, SageAttention 2's sm90 kernel) and the bf16 kernels (xstage bf16,
FlashAttention-4's Hopper forward, PyTorch SDPA's cuDNN backend), same run, same process, same machine.

Speed: every implementation timed like bench/attn/attn_vs_cudnn.py (warm-up of at least --warmup-s seconds,
one event pair per launch, inputs rotated over >= 3x the L2, median of the samples), the implementations
interleaved in two passes of opposite order. Our FP8 figure includes its quantization pre-pass (it is part of
every call), as SageAttention's includes its own quantization and K smoothing. cuDNN FP8 is timed two ways:
`cudnn_fp8` is its kernel alone on inputs quantized beforehand (per-tensor e4m3 scales, the recipe cuDNN's FP8
SDPA takes; output e4m3, which Hopper's FP8 SDPA requires), the strongest form of that peer; `cudnn_fp8_e2e`
adds the quantization of bf16 q, k, v and the dequantization of the output, what a bf16 model pays per call.

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

# (seq, heads), d = 128: M = 16K, 32K, 64K; Wan 720p (75,600 x 5), HunyuanVideo 720p (118,800 x 3)
SHAPES = [(16384, 12), (32768, 12), (65536, 5), (75600, 5), (118800, 3)]
IMPLS = ["xstage_fp8", "cudnn_fp8", "cudnn_fp8_e2e", "sage2", "xstage_bf16", "fa4", "cudnn"]
EIGHT_BIT_PEERS = ("cudnn_fp8", "sage2")
LABELS = {"xstage_fp8": "xstage FP8 (pre-pass incl.)", "cudnn_fp8": "cuDNN FP8 SDPA (kernel)",
          "cudnn_fp8_e2e": "cuDNN FP8 SDPA (+quant/dequant)", "sage2": "SageAttention 2 sm90 (INT8 QK, FP8 PV)",
          "xstage_bf16": "xstage bf16", "fa4": "FlashAttention-4 (bf16)", "cudnn": "SDPA cuDNN (bf16)"}
E4M3_MAX = 448.0


def load_sage2():
    """SageAttention 2's Hopper kernel (INT8 Q K, FP8 P V), called with the library's defaults."""
    try:
        from importlib.metadata import version
        from sageattention import sageattn_qk_int8_pv_fp8_cuda_sm90 as sm90
        info = {"available": True, "version": version("sageattention"),
                "kernel": "sageattn_qk_int8_pv_fp8_cuda_sm90 (library defaults)"}
    except Exception as e:  # noqa: BLE001 - any import failure leaves the peer out, with its reason
        return None, {"available": False, "error": f"{type(e).__name__}: {e}"[:400]}

    def call(q, k, v):
        return sm90(q, k, v, tensor_layout="NHD", is_causal=False)
    return call, info


class CudnnFp8:
    """cuDNN's FP8 SDPA forward through the cuDNN frontend's Python graph API, on [B, S, H, D] tensors.

    prepare(q, k, v) quantizes bf16 inputs to e4m3 with one scale per tensor (amax / 448; scale_s = 448 for the
    probabilities, scale_o = 448 / amax(v) since |O| <= max |V|) and returns the variant pack; kernel(pack) runs
    the graph; __call__ does both and dequantizes the e4m3 output to bf16."""

    def __init__(self):
        import cudnn
        self.cudnn = cudnn
        self.handle = cudnn.create_handle()
        self.graphs = {}

    def graph(self, shape):
        if shape in self.graphs:
            return self.graphs[shape]
        c = self.cudnn
        b, s, h, d = shape
        e4m3, f32 = c.data_type.FP8_E4M3, c.data_type.FLOAT
        g = c.pygraph(io_data_type=e4m3, intermediate_data_type=f32, compute_data_type=f32, handle=self.handle)
        dims, strides = [b, h, s, d], [s * h * d, d, h * d, 1]  # [B, S, H, D] memory seen as [B, H, S, D]
        tq, tk, tv = (g.tensor(name=n, dim=dims, stride=strides, data_type=e4m3) for n in ("q", "k", "v"))
        sc = [g.tensor(name=n, dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=f32)
              for n in ("descale_q", "descale_k", "descale_v", "descale_s", "scale_s", "scale_o")]
        kw = dict(q=tq, k=tk, v=tv, descale_q=sc[0], descale_k=sc[1], descale_v=sc[2], descale_s=sc[3],
                  scale_s=sc[4], scale_o=sc[5], attn_scale=1.0 / math.sqrt(d), use_causal_mask=False)
        try:
            o, _, amax_s, amax_o = g.sdpa_fp8(generate_stats=False, **kw)
        except TypeError:  # frontends before generate_stats
            o, _, amax_s, amax_o = g.sdpa_fp8(is_inference=True, **kw)
        o.set_output(True).set_dim(dims).set_stride(strides).set_data_type(e4m3)
        for a in (amax_s, amax_o):
            a.set_output(True).set_dim([1, 1, 1, 1]).set_stride([1, 1, 1, 1]).set_data_type(f32)
        g.validate()
        g.build_operation_graph()
        g.create_execution_plans([c.heur_mode.A, c.heur_mode.FALLBACK])
        g.check_support()
        g.build_plans()
        ws = torch.empty(max(1, g.get_workspace_size()), dtype=torch.uint8, device="cuda")
        self.graphs[shape] = (g, (tq, tk, tv, o, amax_s, amax_o, *sc), ws)
        return self.graphs[shape]

    @staticmethod
    def quantize(t):
        amax = t.abs().amax().float().clamp(min=1e-30)
        return (t.float() * (E4M3_MAX / amax)).to(torch.float8_e4m3fn), (amax / E4M3_MAX).reshape(1, 1, 1, 1)

    def prepare(self, q, k, v):
        g, ts, _ = self.graph(tuple(q.shape))
        tq, tk, tv, to, tas, tao, dq_, dk_, dv_, ds_, ss_, so_ = ts
        (q8, dq), (k8, dk), (v8, dv) = self.quantize(q), self.quantize(k), self.quantize(v)
        one = torch.ones(1, 1, 1, 1, device="cuda", dtype=torch.float32)
        o8 = torch.empty(q.shape, device="cuda", dtype=torch.float8_e4m3fn)
        pack = {tq: q8, tk: k8, tv: v8, to: o8, tas: torch.empty_like(one), tao: torch.empty_like(one),
                dq_: dq, dk_: dk, dv_: dv, ds_: one / E4M3_MAX, ss_: one * E4M3_MAX, so_: 1.0 / dv}
        return tuple(q.shape), pack

    def kernel(self, shape, pack):
        g, _, ws = self.graphs[shape]
        self.cudnn.set_stream(handle=self.handle, stream=torch.cuda.current_stream().cuda_stream)
        g.execute(pack, ws, handle=self.handle)

    def __call__(self, q, k, v):
        shape, pack = self.prepare(q, k, v)
        self.kernel(shape, pack)
        g, ts, _ = self.graphs[shape]
        return (pack[ts[3]].float() * pack[ts[8]]).to(torch.bfloat16)  # o8 * descale_v (= 1 / scale_o)


def load_cudnn_fp8():
    try:
        import cudnn
        from importlib.metadata import version
        runner = CudnnFp8()
        info = {"available": True, "frontend": version("nvidia-cudnn-frontend"),
                "backend_version": cudnn.backend_version(),
                "recipe": "per-tensor e4m3 scales (amax/448), scale_s 448, scale_o 448/amax(v), e4m3 output"}
    except Exception as e:  # noqa: BLE001
        return None, {"available": False, "error": f"{type(e).__name__}: {e}"[:400]}
    return runner, info


def implementations(xstage, fa4_call, sage2_call, cudnn8):
    """name -> (callable on [B, S, H, D] bf16 tensors returning [B, S, H, D], prepare or None): prepare turns
    bf16 inputs into the callable's arguments outside the timed loop."""
    def sdpa_cudnn(q, k, v):
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)
    calls = {"xstage_fp8": (lambda q, k, v: xstage.attention(q, k, v, precision="fp8"), None),
             "xstage_bf16": (lambda q, k, v: xstage.attention(q, k, v), None),
             "cudnn": (sdpa_cudnn, None)}
    if fa4_call is not None:
        calls["fa4"] = (fa4_call, None)
    if sage2_call is not None:
        calls["sage2"] = (sage2_call, None)
    if cudnn8 is not None:
        calls["cudnn_fp8"] = (cudnn8.kernel, cudnn8.prepare)
        calls["cudnn_fp8_e2e"] = (cudnn8, None)
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
    # cudnn_fp8 (its kernel on pre-quantized inputs) computes what cudnn_fp8_e2e computes: scored once, as both.
    outs = {name: call(q, k, v) for name, (call, prepare) in calls.items() if prepare is None}
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
    if "cudnn_fp8" in calls and "cudnn_fp8_e2e" in res:
        res["cudnn_fp8"] = dict(res["cudnn_fp8_e2e"], note="the same computation as cudnn_fp8_e2e")
    del outs
    torch.cuda.empty_cache()
    return res


def time_impl(impl, s, h, iters, warmup):
    call, prepare = impl
    return base.time_torch(call, 1, s, h, 128, iters, warmup, bshd=True, prepare=prepare)


def plot(points, accuracy_rows, path, device_name):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(15, 4.6))
    names = [n for n in IMPLS if any("tflops" in p.get(n, {}) for p in points)]
    xs = list(range(len(points)))
    width = 0.8 / max(1, len(names))
    for i, name in enumerate(names):
        ys = [p.get(name, {}).get("tflops", 0) for p in points]
        ax.bar([x + (i - (len(names) - 1) / 2) * width for x in xs], ys, width, label=LABELS.get(name, name))
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{p['shape']['seq']}x{p['shape']['heads']}" for p in points])
    ax.set_ylabel("TFLOP/s (4 B S^2 H D / time)")
    ax.set_title("Attention forward, d=128, non-causal, " + device_name)
    top = max([p.get(n, {}).get("tflops", 0) for p in points for n in names] or [1])
    ax.set_ylim(0, 1.35 * top)
    ax.legend(fontsize=7, loc="upper left", ncol=3)
    ax.grid(True, axis="y", alpha=0.3)
    dists = [r["distribution"] for r in accuracy_rows]
    acc_names = [n for n in ("xstage_fp8", "cudnn_fp8", "sage2", "xstage_bf16")
                 if any(n in r["results"] for r in accuracy_rows)]
    w2 = 0.8 / max(1, len(acc_names))
    for i, name in enumerate(acc_names):
        ys = [r["results"].get(name, {}).get("rel_l1", float("nan")) for r in accuracy_rows]
        ax2.bar([x + (i - (len(acc_names) - 1) / 2) * w2 for x in range(len(dists))], ys, w2,
                label=LABELS.get(name, name))
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
    prov = provenance(torch, git_revision_given=args.git_revision,
                      packages=("sageattention", "diffusers", "nvidia-cudnn-frontend", "flash-attn-4"))
    import xstage
    prov["xstage_python"] = {"version": xstage.__version__, "build": xstage.build_info()}
    base.SAMPLER = PowerSampler()
    fa4_call, fa4_info = base.load_fa4()
    sage2_call, sage2_info = load_sage2()
    cudnn8, cudnn8_info = load_cudnn_fp8()
    print("FA4:", json.dumps(fa4_info), "\nsage2:", json.dumps(sage2_info), "\ncudnn_fp8:", json.dumps(cudnn8_info),
          flush=True)
    calls = implementations(xstage, fa4_call, sage2_call, cudnn8)

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
            for peer in IMPLS[1:]:
                if "median_ms" in pt.get(peer, {}):
                    pt[f"fp8_speedup_vs_{peer}"] = pt[peer]["median_ms"] / pt["xstage_fp8"]["median_ms"]
        points.append(pt)
        print(s, h, {n: round(pt[n].get("tflops", float("nan")), 1) for n in order},
              {k: round(v, 3) for k, v in pt.items() if k.startswith("fp8_speedup")}, flush=True)
        with open(args.json + ".partial", "w") as f:  # what a run cut short still leaves
            json.dump({"accuracy": accuracy_rows, "points": points}, f)

    big = [p for p in points if p["shape"]["seq"] >= 16384]

    def every(key, bar):
        vals = [p.get(key) for p in big]
        return {"bar": bar, "min": min((v for v in vals if v is not None), default=None),
                "met": bool(big) and all(v is not None and v >= bar for v in vals)}
    summary = {} if not big else {
        "ours_vs_cudnn_fp8_kernel_ge_1": every("fp8_speedup_vs_cudnn_fp8", 1.0),
        "ours_vs_cudnn_fp8_e2e_ge_1": every("fp8_speedup_vs_cudnn_fp8_e2e", 1.0),
        "ours_vs_sage2": every("fp8_speedup_vs_sage2", 1.0),
        "ours_vs_xstage_bf16_ge_1_4": every("fp8_speedup_vs_xstage_bf16", 1.4),
        "ours_vs_fa4_bf16": every("fp8_speedup_vs_fa4", 1.0)}
    rows = [r for r in accuracy_rows if r["results"]]
    if rows:
        def no_worse(peer):
            per = {}
            for r in rows:
                o, p_ = r["results"].get("xstage_fp8", {}), r["results"].get(peer)
                if p_ is None or "cosine" not in p_:
                    continue
                per[r["distribution"]] = {"ours_rel_l1": o.get("rel_l1"), "peer_rel_l1": p_["rel_l1"],
                                          "ours_cosine": o.get("cosine"), "peer_cosine": p_["cosine"],
                                          "no_worse": o.get("rel_l1", 1) <= p_["rel_l1"] and
                                                      o.get("cosine", 0) >= p_["cosine"]}
            return {"per_distribution": per, "met": bool(per) and all(v["no_worse"] for v in per.values())}
        summary["accuracy_no_worse_than_cudnn_fp8"] = no_worse("cudnn_fp8")
        summary["accuracy_no_worse_than_sage2"] = no_worse("sage2")
        summary["peers_more_accurate_than_ours"] = {
            r["distribution"]: sorted(n for n, v in r["results"].items()
                                      if n in EIGHT_BIT_PEERS and "rel_l1" in v and
                                      v["rel_l1"] < r["results"].get("xstage_fp8", {}).get("rel_l1", 0))
            for r in rows}
    out = {"schema": "xstage.attn_fp8_bench", "version": 2, "phases": sorted(phases), "provenance": prov, "seed": seed,
           "method": "per-launch CUDA event times after a warm-up of >= --warmup-s; inputs rotated over >= 3x L2; "
                     "two passes per shape in opposite orders, samples pooled, median; TFLOP/s = 4 B S^2 H D / median; "
                     "every implementation in this one process",
           "fa4": fa4_info, "sage2": sage2_info, "cudnn_fp8": cudnn8_info, "accuracy": accuracy_rows,
           "points": points, "summary": summary}
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)
    # An empty phase leaves its panel empty; `attn_fp8.py replot` draws both phases' JSONs in one figure.
    plot(points, rows, args.plot, torch.cuda.get_device_name(0))
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
