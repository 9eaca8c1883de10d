"""Peer baseline for the Ulysses post-attention path, run under torchrun (one process per GPU):
cuDNN SDPA (torch.nn.functional.scaled_dot_product_attention pinned to the cuDNN backend) for this rank's
heads over the full sequence, then torch.distributed.all_to_all_single (NCCL) of the output to the
sequence owners and the permute into [local_seq, heads_total, d]. Times SDPA alone, A2A alone and
both in series (CUDA events, warm-up, median; max over ranks). Rank 0 writes JSON.
  torchrun --nproc_per_node 2 bench/ulysses/ulysses_torch.py --out x.json --points 8192:4 16384:4 ...
"""
import argparse, json, os, statistics
import torch
import torch.distributed as dist
from torch.nn.attention import sdpa_kernel, SDPBackend

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--points", nargs="+", required=True, help="M:heads_per_gpu[:text]")
ap.add_argument("--iters", type=int, default=10)
ap.add_argument("--warmup", type=int, default=3)
a = ap.parse_args()

dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
dev = torch.device("cuda")
d = 128


def timed(fn):
    for _ in range(a.warmup):
        fn()
    torch.cuda.synchronize()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(a.iters + 1)]
    dist.barrier()
    for i in range(a.iters):
        ev[i].record()
        fn()
    ev[a.iters].record()
    torch.cuda.synchronize()
    t = torch.tensor([ev[i].elapsed_time(ev[i + 1]) * 1e3 for i in range(a.iters)], device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


# NCCL's first collectives set up connections and run slow: warm the communicator up once, so the first
# point's all_to_all is timed like the others.
_w = torch.empty(world * (1 << 20), device=dev, dtype=torch.bfloat16)
_r = torch.empty_like(_w)
for _ in range(20):
    dist.all_to_all_single(_r, _w)
torch.cuda.synchronize()
del _w, _r

results = []
for p in a.points:
    parts = [int(x) for x in p.split(":")]
    m, hl = parts[0], parts[1]
    text = parts[2] if len(parts) > 2 else 0
    seq = m + text
    shard = (seq + world - 1) // world
    lens = [min(shard, max(0, seq - r * shard)) for r in range(world)]
    q = torch.randn(1, hl, seq, d, device=dev, dtype=torch.bfloat16)
    k = torch.randn_like(q)
    v = torch.randn_like(q)
    out = torch.empty(1, hl, seq, d, device=dev, dtype=torch.bfloat16)
    o_seq = torch.empty(seq, hl, d, device=dev, dtype=torch.bfloat16)
    recv = torch.empty(world * lens[rank], hl, d, device=dev, dtype=torch.bfloat16)

    def fa():
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            out.copy_(torch.nn.functional.scaled_dot_product_attention(q, k, v))

    def a2a():
        # The attention output in the DiT layout [seq, heads_per_gpu, d] is what the A2A sends.
        dist.all_to_all_single(recv, o_seq, output_split_sizes=[lens[rank]] * world, input_split_sizes=lens)
        recv.view(world, lens[rank], hl, d).permute(1, 0, 2, 3).reshape(lens[rank], world * hl, d)

    def serial():
        fa()
        o_seq.copy_(out[0].transpose(0, 1))
        a2a()

    r = {"seq_image": m, "seq_text": text, "heads_per_gpu": hl,
         "cudnn_sdpa_us": timed(fa), "nccl_a2a_us": timed(a2a), "serial_cudnn_nccl_us": timed(serial)}
    for key in ["cudnn_sdpa_us", "nccl_a2a_us", "serial_cudnn_nccl_us"]:
        r[key.replace("_us", "_median_us")] = statistics.median(r[key])
    results.append(r)
    if rank == 0:
        print(f"torch M={m}+{text} hl={hl}: sdpa {r['cudnn_sdpa_median_us']:.1f} a2a {r['nccl_a2a_median_us']:.1f} "
              f"serial {r['serial_cudnn_nccl_median_us']:.1f} us", flush=True)

if rank == 0:
    with open(a.out, "w") as f:
        json.dump({"schema": "xstage.ulysses_torch/1", "torch": torch.__version__,
                   "cudnn": torch.backends.cudnn.version(), "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                   "world": world, "timing": "CUDA events per iteration, max over ranks, median", "points": results}, f, indent=1)
dist.destroy_process_group()
