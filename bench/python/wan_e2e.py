#!/usr/bin/env python3
"""End-to-end forward of a Wan2.1-14B-shaped diffusers transformer at 720p on one GPU, bf16, random weights, a few
blocks: attention on xstage vs diffusers' `_native_cudnn` backend (PyTorch SDPA on cuDNN) vs FlashAttention-4's
Hopper forward (flash_attn.cute), all in one process on the same model and inputs.

Tokens: 81 frames of 1280x720 -> VAE (4x in time, 8x in space) -> 21 x 90 x 160 latents -> patch (1, 2, 2) ->
21 * 45 * 80 = 75,600 video tokens; cross-attention to 512 text tokens. xstage and FA4 are plugged in through
xstage.integrations.diffusers with strict=True (every self- and cross-attention call must go to them; the
fallback would be `_native_cudnn`): diffusers 0.42's own FA4 backend (`flash_4_hub`) fetches the kernel from the
Hugging Face Hub through the `kernels` package, which an offline GPU machine cannot do. Each implementation's first forward (FA4 compiles per shape then) is timed
apart and its output compared with the others'; then warm-up rounds and N timed rounds, the order rotating each
round, one CUDA-event pair around each whole forward; medians of the samples. Also times the two attention calls
alone (same inputs for all three). `xstage_sdpa` is the same kernel reached the way an unmodified model reaches it:
diffusers' native backend calls torch's scaled_dot_product_attention and
`torch.nn.attention.activate_flash_attention_impl("xstage")` serves its flash op (torch 2.10 on). Writes JSON with provenance and raw samples to --out, and a PNG with --plot.
"""
import argparse
import contextlib
import json
import os
import pathlib
import statistics
import sys
import time

import torch

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "common"))
from provenance import dist_version, provenance, sm_clock_mhz  # noqa: E402

IMPLS = ("xstage", "xstage_sdpa", "cudnn", "fa4", "xstage_fp8", "sage2")
LABELS = {"xstage": "xstage", "xstage_sdpa": "xstage through SDPA (diffusers native backend, "
          "activate_flash_attention_impl)", "cudnn": "cuDNN (diffusers _native_cudnn)",
          "fa4": "FlashAttention-4 (flash_attn.cute)",
          "xstage_fp8": "xstage FP8", "sage2": "SageAttention 2 sm90 (INT8 QK, FP8 PV)"}
EIGHT_BIT = ("xstage_fp8", "sage2")  # compared with the others at --agree-rel-l2-8bit


def latent_grid(frames, height, width, patch=(1, 2, 2), vae_time=4, vae_space=8):
    """(latent frames, latent height, latent width) and the token count after patching; ValueError on sizes the
    Wan VAE and patching do not divide."""
    if (frames - 1) % vae_time or height % (vae_space * patch[1]) or width % (vae_space * patch[2]):
        raise ValueError(f"--frames {frames} / --height {height} / --width {width}: need frames = 4k+1 and "
                         f"height, width multiples of {vae_space * patch[1]}")
    f, h, w = (frames - 1) // vae_time + 1, height // vae_space, width // vae_space
    return (f, h, w), (f // patch[0]) * (h // patch[1]) * (w // patch[2])


def fa4_kernel():
    import xstage.integrations.diffusers as xd
    try:
        from flash_attn.cute import flash_attn_func
    except ImportError:
        from flash_attn.cute.interface import flash_attn_func

    def fn(query, key, value, scale):
        out = flash_attn_func(query, key, value, softmax_scale=scale, causal=False)
        return out[0] if isinstance(out, tuple) else out

    return xd.AttentionKernel("flash_attn_4", fn, "cuda", (torch.bfloat16,), (64, 128), False)


def sage2_kernel():
    import xstage.integrations.diffusers as xd
    from sageattention import sageattn_qk_int8_pv_fp8_cuda_sm90 as sm90

    def fn(query, key, value, scale):
        return sm90(query, key, value, tensor_layout="NHD", is_causal=False, sm_scale=scale)

    return xd.AttentionKernel("sage2_sm90", fn, "cuda", (torch.bfloat16,), (64, 128), False)


def to_bf16_as_loaded(model):
    """bf16 weights except the modules diffusers keeps in float32 when it loads a checkpoint with
    torch_dtype=bfloat16 (the model's _keep_in_fp32_modules, matched by name component as from_pretrained does)."""
    model.to(torch.bfloat16)
    keep = set(getattr(model, "_keep_in_fp32_modules", None) or ())
    for name, t in list(model.named_parameters()) + list(model.named_buffers()):
        if keep.intersection(name.split(".")):
            t.data = t.data.float()
    return model


def agreement(a, b):
    d = (a.float() - b.float())
    return {"max_abs": d.abs().max().item(), "mean_abs": d.abs().mean().item(),
            "rel_l2": (d.norm() / b.float().norm()).item()}


def summary_of(samples):
    return {"median_ms": statistics.median(samples), "min_ms": min(samples), "max_ms": max(samples),
            "samples": len(samples)}


def synchronize(device):
    if device == "cuda":
        torch.cuda.synchronize()


def time_calls(fn, iters, device):
    """Milliseconds of each of `iters` calls: one CUDA-event pair around each (wall clock on the CPU)."""
    if device != "cuda":
        out = []
        for _ in range(iters):
            t0 = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t0) * 1e3)
        return out
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for a, b in ev:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    return [a.elapsed_time(b) for a, b in ev]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="results JSON")
    ap.add_argument("--plot", help="PNG bar plot (bench/python/plot_wan_e2e.py draws it from the JSON too)")
    ap.add_argument("--blocks", type=int, default=2, help="transformer blocks (Wan2.1-14B has 40)")
    ap.add_argument("--heads", type=int, default=40, help="attention heads of 128 (Wan2.1-14B: 40)")
    ap.add_argument("--ffn-dim", type=int, default=13824, help="feed-forward width (Wan2.1-14B: 13824)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                    help="cpu: the same steps with wall-clock timing, to test the script on small sizes")
    ap.add_argument("--frames", type=int, default=81)
    ap.add_argument("--height", type=int, default=720)
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--text-tokens", type=int, default=512)
    ap.add_argument("--iters", type=int, default=10, help="timed rounds (one forward per implementation each)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed rounds after the first forward")
    ap.add_argument("--attn-iters", type=int, default=10, help="timed calls of each attention shape alone")
    ap.add_argument("--impls", default=",".join(IMPLS), help=f"comma-separated subset of {','.join(IMPLS)}")
    ap.add_argument("--agree-rel-l2", type=float, default=2e-2, help="largest pairwise relative L2 of outputs")
    ap.add_argument("--agree-rel-l2-8bit", type=float, default=1e-1,
                    help="the same for a pair with an 8-bit implementation (xstage_fp8, sage2)")
    ap.add_argument("--git-revision", default=os.environ.get("XSTAGE_GIT_REVISION"))
    args = ap.parse_args(argv)

    impls = [i for i in args.impls.split(",") if i]
    bad = [i for i in impls if i not in IMPLS]
    if bad or not impls:
        sys.exit(f"wan_e2e: --impls {args.impls!r}: unknown {bad or 'empty'}; choose from {','.join(IMPLS)}")
    for name in ("blocks", "iters", "text_tokens", "attn_iters", "heads", "ffn_dim"):
        if getattr(args, name) < 1:
            sys.exit(f"wan_e2e: --{name.replace('_', '-')} {getattr(args, name)}: must be at least 1")
    try:
        grid, tokens = latent_grid(args.frames, args.height, args.width)
    except ValueError as e:
        sys.exit(f"wan_e2e: {e}")
    dev = args.device
    if dev == "cuda" and not torch.cuda.is_available():
        sys.exit("wan_e2e: --device cuda: no CUDA GPU visible")
    clock = sm_clock_mhz if dev == "cuda" else (lambda: None)

    import diffusers
    from diffusers import WanTransformer3DModel
    from diffusers.models import attention_dispatch
    import xstage.integrations.diffusers as xd

    kernels = {}
    errors = {}
    for impl, make in (("xstage", xd.xstage_kernel), ("fa4", fa4_kernel),
                       ("xstage_fp8", lambda: xd.xstage_kernel("fp8")), ("sage2", sage2_kernel)):
        if impl in impls:
            try:
                kernels[impl] = make()
            except (ImportError, ValueError) as e:   # reported; the others are still measured
                errors[impl] = f"import: {e}"
                impls.remove(impl)

    torch.manual_seed(0)
    with torch.device(dev):   # the other sizes are Wan2.1-14B's (the class defaults)
        model = to_bf16_as_loaded(WanTransformer3DModel(num_layers=args.blocks, num_attention_heads=args.heads,
                                                        ffn_dim=args.ffn_dim)).eval()
    model.set_attention_backend("_native_cudnn")   # the baseline, and the fallback of the routed runs
    g = torch.Generator(dev).manual_seed(1)
    latents = torch.randn(1, 16, *grid, device=dev, dtype=torch.bfloat16, generator=g)
    text = torch.randn(1, args.text_tokens, 4096, device=dev, dtype=torch.bfloat16, generator=g)
    timestep = torch.tensor([500], device=dev)
    heads, head_dim = model.config.num_attention_heads, model.config.attention_head_dim

    from torch.nn import attention as torch_attention
    if "xstage_sdpa" in impls and not hasattr(torch_attention, "activate_flash_attention_impl"):
        errors["xstage_sdpa"] = f"torch {torch.__version__} has no activate_flash_attention_impl"
        impls.remove("xstage_sdpa")

    @contextlib.contextmanager
    def sdpa_route():
        """diffusers' native backend, torch's flash op served by xstage; the counts of served and passed calls."""
        model.set_attention_backend("native")
        torch_attention.activate_flash_attention_impl("xstage")
        try:
            yield
        finally:
            torch_attention.restore_flash_attention_impl()
            model.set_attention_backend("_native_cudnn")

    def context(impl):
        if impl == "cudnn":
            return contextlib.nullcontext()
        if impl == "xstage_sdpa":
            return sdpa_route()
        return xd.enabled(model, kernel=kernels[impl], strict=True)

    def sdpa_counts():
        from xstage import _torch_sdpa
        return _torch_sdpa.counts()

    def forward():
        return model(latents, timestep, text).sample

    # First forward of each: compile/autotune time, output, and which calls went where.
    outputs, first_call_s, routing = {}, {}, {}
    with torch.inference_mode():
        for impl in list(impls):
            try:
                synchronize(dev)
                t0 = time.perf_counter()
                before = sdpa_counts() if impl == "xstage_sdpa" else None
                with context(impl):
                    outputs[impl] = forward()
                    synchronize(dev)
                    if impl == "xstage_sdpa":
                        after = sdpa_counts()
                        routing[impl] = {"routed": after["served"] - before["served"],
                                         "fallback_total": after["passed"] - before["passed"]}
                    elif impl != "cudnn":
                        routing[impl] = xd.stats(model)
                first_call_s[impl] = time.perf_counter() - t0
            except Exception as e:   # one implementation failing leaves the others measured
                errors[impl] = f"{type(e).__name__}: {str(e)[:400]}"
                impls.remove(impl)
        finite = {i: bool(torch.isfinite(o).all()) for i, o in outputs.items()}
        agree = {f"{a}_vs_{b}": agreement(outputs[a], outputs[b])
                 for n, a in enumerate(list(outputs)) for b in list(outputs)[n + 1:]}
        del outputs

        # Whole forwards: warm-up rounds, then timed rounds in rotating order.
        samples, clock_start = {i: [] for i in impls}, None
        for r in range(args.warmup + args.iters):
            if r == args.warmup:
                clock_start = clock()
            order = impls[r % len(impls):] + impls[:r % len(impls)]
            for impl in order:
                with context(impl):
                    if r < args.warmup:
                        forward()
                    else:
                        samples[impl] += time_calls(forward, 1, dev)
        clock_end = clock()

        # The two attention shapes alone, on the same random inputs for every implementation.
        q = torch.randn(1, tokens, heads, head_dim, device=dev, dtype=torch.bfloat16, generator=g)
        kv_self = [torch.randn_like(q) for _ in range(2)]
        kv_cross = [torch.randn(1, args.text_tokens, heads, head_dim, device=dev, dtype=torch.bfloat16,
                                generator=g) for _ in range(2)]
        attn = {}
        for impl in impls:
            if impl == "cudnn":
                def call(k, v):
                    return attention_dispatch.dispatch_attention_fn(
                        q, k, v, backend=attention_dispatch.AttentionBackendName._NATIVE_CUDNN)
            elif impl == "xstage_sdpa":
                def call(k, v):
                    with context(impl):
                        return torch.nn.functional.scaled_dot_product_attention(
                            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)
            else:
                def call(k, v, fn=kernels[impl].fn):
                    return fn(q, k, v, None)
            attn[impl] = {}
            for shape, (k, v) in (("self", kv_self), ("cross", kv_cross)):
                call(k, v)
                t = time_calls(lambda: call(k, v), args.attn_iters, dev)
                attn[impl][shape] = dict(summary_of(t), samples_ms=t)

    rows = []
    for impl in impls:
        row = {"impl": impl, "label": LABELS[impl], "first_call_s": first_call_s[impl], "samples_ms": samples[impl],
               "attention_only": attn.get(impl), "routing": routing.get(impl), "output_finite": finite[impl]}
        row.update(summary_of(samples[impl]))
        rows.append(row)
    med = {r["impl"]: r["median_ms"] for r in rows}
    summary = {"median_ms": med,
               "all_agree": all(a["rel_l2"] <= (args.agree_rel_l2_8bit if any(i in EIGHT_BIT for i in k.split("_vs_"))
                                                else args.agree_rel_l2) for k, a in agree.items())
                            and all(finite.values()),
               "all_calls_routed": all(s["fallback_total"] == 0 and s["routed"] == 2 * args.blocks
                                       for s in routing.values())}
    for ours in ("xstage", "xstage_sdpa", "xstage_fp8"):
        for base in ("cudnn", "fa4", "sage2", "xstage"):
            if ours != base and ours in med and base in med:
                summary[f"speedup_{ours}_vs_{base}"] = med[base] / med[ours]
    result = {
        "schema": "xstage.wan_e2e", "version": 1,
        "workload": {"model": "WanTransformer3DModel (Wan2.1-14B config)", "blocks": args.blocks, "heads": heads,
                     "head_dim": head_dim, "frames": args.frames, "height": args.height, "width": args.width,
                     "latent_grid": list(grid), "video_tokens": tokens, "text_tokens": args.text_tokens,
                     "dtype": "bfloat16", "batch": 1, "iters": args.iters, "warmup": args.warmup},
        "provenance": {
            **provenance(torch, git_revision_given=args.git_revision,
                         argv=sys.argv if argv is None else ["wan_e2e.py", *argv]),
            "device": torch.cuda.get_device_name(0) if dev == "cuda" else "cpu",
            "diffusers": diffusers.__version__,
            "flash_attn_4": dist_version("flash-attn-4", "flash_attn_4", "flash-attn"),
            "cutlass_dsl": dist_version("nvidia-cutlass-dsl"),
            "sm_clock_mhz_timed_start": clock_start, "sm_clock_mhz_timed_end": clock_end,
        },
        "rows": rows, "agreement": agree, "errors": errors, "summary": summary,
    }
    pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    for r in rows:
        a = r["attention_only"] or {}
        print(f"{r['impl']:7s} forward median {r['median_ms']:9.1f} ms (first call {r['first_call_s']:.1f} s); "
              f"attention alone: self {a.get('self', {}).get('median_ms', float('nan')):7.2f} ms, "
              f"cross {a.get('cross', {}).get('median_ms', float('nan')):6.2f} ms")
    for k, a in agree.items():
        print(f"agreement {k}: rel L2 {a['rel_l2']:.2e}, max abs {a['max_abs']:.2e}")
    print("errors:", errors or "none")
    print("summary:", json.dumps(summary))
    if args.plot:
        sys.path.insert(0, str(HERE))
        from plot_wan_e2e import plot
        plot(result, args.plot)
    return 0 if summary["all_agree"] and summary["all_calls_routed"] and not errors else 1


if __name__ == "__main__":
    sys.exit(main())
