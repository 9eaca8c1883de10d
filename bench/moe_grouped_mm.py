"""Linear-1 and Linear-2 of the MoE shapes as grouped GEMMs in PyTorch (torch._grouped_mm, bf16), one GPU:
the per-GPU GEMM work of a balanced expert-parallel layer on 2 ranks (local experts, equal rows each).
Context for the fused kernel's TFLOP/s; not part of the product. Writes JSON with the torch version."""
import argparse, json, time
import torch

SHAPES = {  # name: hidden, h_inter, experts, top_k (model::builtin_moe_shapes)
    "qwen3-235b-a22b": (4096, 1536, 128, 8),
    "deepseek-v3": (7168, 2048, 256, 8),
    "dit-moe-g2-16e2a": (1408, 5632, 16, 2),
}


def bench(fn, iters=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(iters):
        start.record(); fn(); end.record(); end.synchronize()
        ts.append(start.elapsed_time(end))
    ts.sort()
    return ts[len(ts) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--tokens", type=int, nargs="+", default=[1024, 8192])
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    res = []
    for name, (h, hi, e, k) in SHAPES.items():
        el = e // a.ranks
        for t in a.tokens:
            m = t * k * a.ranks // e  # rows per local expert, balanced
            rows = m * el
            x = torch.randn(rows, h, device="cuda", dtype=torch.bfloat16)
            act = torch.randn(rows, hi, device="cuda", dtype=torch.bfloat16)
            w1 = torch.randn(el, 2 * hi, h, device="cuda", dtype=torch.bfloat16) * 0.02
            w2 = torch.randn(el, h, hi, device="cuda", dtype=torch.bfloat16) * 0.02
            offs = torch.arange(1, el + 1, device="cuda", dtype=torch.int32) * m
            r = {"shape": name, "tokens_per_rank": t, "rows_per_expert": m, "local_experts": el}
            try:
                ms1 = bench(lambda: torch._grouped_mm(x, w1.transpose(1, 2), offs=offs))
                ms2 = bench(lambda: torch._grouped_mm(act, w2.transpose(1, 2), offs=offs))
                r.update(linear1_ms=ms1, linear2_ms=ms2,
                         linear1_tflops=2 * rows * h * 2 * hi / ms1 / 1e9,
                         linear2_tflops=2 * rows * hi * h / ms2 / 1e9)
                print(f"{name:18s} T={t:6d} rows/expert {m:5d}: L1 {ms1:7.3f} ms {r['linear1_tflops']:6.1f} TFLOP/s, "
                      f"L2 {ms2:7.3f} ms {r['linear2_tflops']:6.1f} TFLOP/s", flush=True)
            except Exception as ex:  # report, keep going
                r["error"] = repr(ex)
                print(f"{name} T={t}: {ex!r}", flush=True)
            res.append(r)
            del x, act, w1, w2
            torch.cuda.empty_cache()
    out = {"schema": "xstage.moe_grouped_mm", "version": 1, "torch": torch.__version__,
           "device": torch.cuda.get_device_name(0), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "results": res}
    if a.out:
        json.dump(out, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
