"""xstage.attention's documentation (one text for the torch layer and the stand-in) and the stand-in that
`xstage.attention` is where torch is not installed. Imports only _dlpack: the package's __init__ and the torch
layer (_torch_attention) both read it.
"""

from __future__ import annotations

from typing import Any

from ._dlpack import _describe

__all__ = ["ATTENTION_DOC", "attention_without_torch"]

ATTENTION_DOC = """FlashAttention forward (non-causal, no dropout, forward only) on bfloat16 CUDA tensors of a Hopper GPU.

    out = xstage.attention(q, k, v)                   # [B, S, H, D] (layout="bshd", the default)
    out = xstage.attention(q, k, v, layout="bhsd")    # [B, H, S, D], as scaled_dot_product_attention takes

q [B, Sq, H, D], k and v [B, Skv, H, D] (layout "bshd"; "bhsd": q [B, H, Sq, D], k and v [B, H, Skv, D]) with
D in {64, 128}; Sq and Skv independent (cross attention), any B. Returns out in q's layout, bfloat16, and with
return_lse=True also lse [B, H, Sq] float32 (natural-log log-sum-exp of each query row). Runs on the current CUDA
stream of q's device and never synchronizes. Strided views the kernel cannot read are copied
(xstage.attention_copy_count() counts them).

softmax_scale (or its alias scale, as SDPA names it): None (1/sqrt(D)) or a positive finite number; giving both
with different values is refused. The arguments of other attention functions are accepted at the values the kernel
computes: causal / is_causal False and dropout_p 0.0. causal=True, dropout_p > 0 and inputs that require grad
(with grad mode on) are refused with ValueError naming the argument: use torch.nn.functional.
scaled_dot_product_attention for those (training, causal masks, dropout).

precision: "bf16" (bf16 matrix products, fp32 accumulation) or "fp8" (D 128 only): a pre-pass on the same stream
quantizes q, k and v to 8 bits (docs/attn_fp8.md: the formats and scales), then the matrix products run on 8-bit
tensor cores; inputs and output stay bfloat16. "fp8" takes a scratch buffer (xstage.attention_workspace_bytes bytes,
about one byte per element of q, k and v) from torch's caching allocator for the duration of each call. Its error is
larger than bf16's (docs/attn_fp8.md).

Meta tensors are refused (they have no data); torch.compile traces the call through the custom op
torch.ops.xstage.attention and its fake kernel. Without torch installed, a TypeError says so (use
xstage.attention_dlpack for other DLPack tensors).
"""


def attention_without_torch(q: Any, k: Any, v: Any, *, softmax_scale: float | None = None,
                            return_lse: bool = False, precision: str = "bf16", layout: str = "bshd",
                            scale: float | None = None, causal: bool = False, is_causal: bool = False,
                            dropout_p: float = 0.0) -> Any:
    raise TypeError(f"xstage.attention: q is a {_describe(q)}; accepted: a torch.Tensor "
                    "(torch is not installed: pip install torch); for other DLPack tensors use "
                    "xstage.attention_dlpack")


attention_without_torch.__doc__ = ATTENTION_DOC
attention_without_torch.__name__ = attention_without_torch.__qualname__ = "attention"
attention_without_torch.__module__ = "xstage"
