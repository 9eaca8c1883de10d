"""Shared by the attention GPU tests (bf16 and FP8): the module-level skips, fresh inputs and the fp32 reference.
Imported after `pytest.importorskip("torch")`."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import xstage

DEV = "cuda"
BF16 = torch.bfloat16


def skip_without_the_kernel() -> None:
    """Skips the calling test module where the kernel cannot run: no CUDA GPU, not sm_90, or a build without CUDA."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU", allow_module_level=True)
    if torch.cuda.get_device_capability(0) != (9, 0):
        pytest.skip("the attention kernel is built for sm_90a (H100/H200)", allow_module_level=True)
    if not xstage.has_cuda():
        pytest.skip("xstage was built without CUDA", allow_module_level=True)


def make_qkv(b, sq, skv, h, d, seed):
    g = torch.Generator(device=DEV).manual_seed(seed)
    q = torch.randn((b, sq, h, d), generator=g, device=DEV).to(BF16)
    k = torch.randn((b, skv, h, d), generator=g, device=DEV).to(BF16)
    v = torch.randn((b, skv, h, d), generator=g, device=DEV).to(BF16)
    return q, k, v


def reference(q, k, v, scale=None):
    """fp32 SDPA on the bf16 inputs; out [B, S, H, D] fp32 and lse [B, H, S] fp32."""
    qf, kf, vf = (t.float().transpose(1, 2) for t in (q, k, v))
    s = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    with sdpa_kernel(SDPBackend.MATH):  # plain fp32 matrix products (TF32 is off by default)
        out = F.scaled_dot_product_attention(qf, kf, vf, scale=s).transpose(1, 2)
    lse = torch.logsumexp((qf @ kf.transpose(-1, -2)) * s, dim=-1)
    return out, lse


def graph_replays_match_eager(shape, attention, seeds=(32,), warmups=2):
    """Captures attention(q, k, v) on static inputs of `shape` (B, S_q, S_kv, H, D) in a CUDA graph (after
    `warmups` calls on a side stream), then for each seed copies fresh inputs in, replays, and asserts the
    graph's output equals an eager call on those inputs bit for bit."""
    q, k, v = make_qkv(*shape, seed=31)
    static_q, static_k, static_v = q.clone(), k.clone(), v.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmups):
            attention(static_q, static_k, static_v)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # any workspace comes from the graph's private pool
        static_out = attention(static_q, static_k, static_v)
    for seed in seeds:
        q2, k2, v2 = make_qkv(*shape, seed=seed)
        static_q.copy_(q2)
        static_k.copy_(k2)
        static_v.copy_(v2)
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(static_out, attention(q2, k2, v2), rtol=0, atol=0)
