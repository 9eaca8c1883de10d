"""Linear-1 and Linear-2 of the MoE shapes as grouped GEMMs in PyTorch (torch._grouped_mm, bf16), one GPU:
the per-GPU GEMM work of a balanced expert-parallel layer on 2 ranks (local experts, equal rows each).
Context for the fused kernel's TFLOP/s; not part of the product. Writes JSON with the torch version.
--fp8 also times torch._scaled_grouped_mm (e4m3 operands, rowwise scales: one per activation row and
one per weight output channel, not the fused kernel's 128-channel / 128x128-block scales) where this
torch has it; a failure is recorded as linear1_fp8_error, the bf16 numbers stand."""
import argparse, json, time
import torch

SHAPES = {  # name: hidden, h_inter, experts, top_k (model::builtin_moe_shapes, src/model/workloads.cpp)
    "deepseek-v4-flash": (4096, 2048, 256, 6),
    "deepseek-v4-pro": (7168, 3072, 384, 6),
    "deepseek-v3": (7168, 2048, 256, 8),
    "qwen3-235b-a22b": (4096, 1536, 128, 8),
    "mimo-v2-flash": (4096, 2048, 256, 8),
    "dit-moe-g2-16e2a": (1408, 5632, 16, 2),
    "glm-4.5": (5120, 1536, 160, 8),
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
    ap.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    ap.add_argument("--fp8", action="store_true", help="also torch._scaled_grouped_mm (e4m3, rowwise scales)")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    res = []
    for name in a.shapes:
        h, hi, e, k = SHAPES[name]
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
            if a.fp8:
                try:
                    f8 = torch.float8_e4m3fn
                    x8, act8 = x.to(f8), act.to(f8)
                    w18, w28 = w1.to(f8), w2.to(f8)  # [el][n][k] row-major: transposed below, column-major
                    sx = torch.ones(rows, device="cuda", dtype=torch.float32)
                    sw1 = torch.ones(el, 2 * hi, device="cuda", dtype=torch.float32)
                    sw2 = torch.ones(el, h, device="cuda", dtype=torch.float32)
                    f1 = lambda: torch._scaled_grouped_mm(x8, w18.transpose(1, 2), sx, sw1, offs=offs,
                                                          out_dtype=torch.bfloat16)
                    f2 = lambda: torch._scaled_grouped_mm(act8, w28.transpose(1, 2), sx, sw2, offs=offs,
                                                          out_dtype=torch.bfloat16)
                    ms1, ms2 = bench(f1), bench(f2)
                    r.update(linear1_fp8_ms=ms1, linear2_fp8_ms=ms2,
                             linear1_fp8_tflops=2 * rows * h * 2 * hi / ms1 / 1e9,
                             linear2_fp8_tflops=2 * rows * hi * h / ms2 / 1e9,
                             fp8_op="torch._scaled_grouped_mm, e4m3, rowwise scales, bf16 out")
                    print(f"{name:18s} T={t:6d} fp8: L1 {ms1:7.3f} ms {r['linear1_fp8_tflops']:6.1f} TFLOP/s, "
                          f"L2 {ms2:7.3f} ms {r['linear2_fp8_tflops']:6.1f} TFLOP/s", flush=True)
                    del x8, act8, w18, w28
                except Exception as ex:
                    r["linear1_fp8_error"] = repr(ex)
                    print(f"{name} T={t} fp8: {ex!r}", flush=True)
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
