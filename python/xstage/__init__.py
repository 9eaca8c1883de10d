"""xstage: X-Stage-aware GPU kernels for DiT inference (Hopper), and the X-Stage model and planner.

    import xstage
    out = xstage.attention(q, k, v)            # torch bf16 CUDA [B, S, H, D]; torch.compile-able
    out = xstage.attention(q, k, v, layout="bhsd")    # SDPA's [B, H, S, D]
    out = xstage.attention(q, k, v, precision="fp8")  # 8-bit matrix products (head_dim 128)
    xstage.attention_dlpack(q, k, v, out, stream=s)   # any DLPack tensors (CuPy, JAX, ...)
    import xstage.planner                      # model / plan / simulate, the CLI's JSON (CPU)
    out = xstage.ulysses_attention(q, k, v, group)   # sequence-parallel over a torch NCCL group (torchrun)
    moe = xstage.FusedMoE(...)                 # fused MoE layer (xstage/moe.py)

Switches of other libraries: `torch.nn.attention.activate_flash_attention_impl("xstage")` (torch 2.10 on) puts
the kernel behind `scaled_dot_product_attention`; `import xstage.integrations.diffusers` registers the diffusers
attention backends "xstage" and "xstage_fp8" (`model.set_attention_backend("xstage")`).

`import xstage` needs neither torch nor a GPU: the PyTorch layer is imported on first use of `xstage.attention`,
and the native library (libxstage_capi.so) is loaded on first use. Where torch has an SDPA implementation
registry, "xstage" is registered with it (never activated) when torch.nn.attention is imported.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from . import _sdpa_registration
from ._dlpack import _describe, attention_dlpack, attention_workspace_bytes
from ._native import XstageLoadError, build_info, has_cuda

if TYPE_CHECKING:  # the lazy attributes, for type checkers
    from . import distributed, moe, planner
    from .distributed import ulysses_attention
    from .moe import FusedMoE, fused_moe, quantize_fp8_blocks

__version__ = "0.1.0"

__all__ = ["FusedMoE", "XstageLoadError", "__version__", "attention", "attention_copy_count", "attention_dlpack",
           "attention_workspace_bytes", "build_info", "distributed", "fused_moe", "has_cuda", "moe", "planner",
           "quantize_fp8_blocks", "ulysses_attention"]

_LAZY = {  # attribute -> (module, attribute in it, or None for the module itself)
    "planner": (".planner", None),
    "distributed": (".distributed", None),
    "ulysses_attention": (".distributed", "ulysses_attention"),
    "moe": (".moe", None),
    "FusedMoE": (".moe", "FusedMoE"),
    "fused_moe": (".moe", "fused_moe"),
    "quantize_fp8_blocks": (".moe", "quantize_fp8_blocks"),
}

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


def _attention_without_torch(q: Any, k: Any, v: Any, *, softmax_scale: float | None = None,
                             return_lse: bool = False, precision: str = "bf16", layout: str = "bshd",
                             scale: float | None = None, causal: bool = False, is_causal: bool = False,
                             dropout_p: float = 0.0) -> Any:
    raise TypeError(f"xstage.attention: q is a {_describe(q)}; accepted: a torch.Tensor "
                    "(torch is not installed: pip install torch); for other DLPack tensors use "
                    "xstage.attention_dlpack")


_attention_without_torch.__doc__ = ATTENTION_DOC
_attention_without_torch.__name__ = _attention_without_torch.__qualname__ = "attention"


def _torch_layer() -> Any:
    try:
        import torch  # noqa: F401
    except ImportError:
        return None
    from . import _torch_attention
    return _torch_attention


def attention_copy_count() -> int:
    """How many strided q/k/v views xstage.attention copied because the kernel cannot read them in place."""
    layer = _torch_layer()
    return layer.copy_count() if layer else 0


if TYPE_CHECKING:
    def attention(q: Any, k: Any, v: Any, *, softmax_scale: float | None = None, return_lse: bool = False,
                  precision: str = "bf16", layout: str = "bshd", scale: float | None = None, causal: bool = False,
                  is_causal: bool = False, dropout_p: float = 0.0) -> Any: ...


def __getattr__(name: str) -> Any:
    # Lazy: the first access to `attention` imports torch and registers the xstage::attention custom op.
    if name == "attention":
        layer = _torch_layer()
        fn = layer.attention if layer else _attention_without_torch
        globals()["attention"] = fn
        return fn
    lazy = _LAZY.get(name)
    if lazy is not None:
        module = importlib.import_module(lazy[0], __name__)  # `from . import` would recurse here
        return module if lazy[1] is None else getattr(module, lazy[1])
    raise AttributeError(f"module 'xstage' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


_sdpa_registration.install()
