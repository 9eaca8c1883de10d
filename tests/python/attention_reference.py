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
