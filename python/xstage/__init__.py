"""xstage: X-Stage-aware GPU kernels for DiT inference (Hopper), and the X-Stage model and planner.

    import xstage
    out = xstage.attention(q, k, v)            # torch bf16 CUDA [B, S, H, D]; torch.compile-able
    out = xstage.attention(q, k, v, precision="fp8")  # 8-bit matrix products (head_dim 128)
    xstage.attention_dlpack(q, k, v, out, stream=s)   # any DLPack tensors (CuPy, JAX, ...)
    import xstage.planner                      # model / plan / simulate, the CLI's JSON (CPU)
    out = xstage.ulysses_attention(q, k, v, group)   # sequence-parallel over a torch NCCL group (torchrun)

`import xstage` needs neither torch nor a GPU: the PyTorch layer is imported on first use of
`xstage.attention`, and the native library (libxstage_capi.so) is loaded on first use.
"""

from __future__ import annotations

from ._dlpack import _describe, attention_dlpack, attention_workspace_bytes
from ._native import XstageLoadError, build_info, has_cuda

__version__ = "0.1.0"

__all__ = ["attention", "attention_dlpack", "attention_workspace_bytes", "attention_copy_count", "has_cuda", "build_info", "XstageLoadError",
           "planner", "__version__"]


def _attention_without_torch(q, k, v, *, softmax_scale=None, return_lse=False, precision="bf16"):
    raise TypeError(f"xstage.attention: q is a {_describe(q)}; accepted: a torch.Tensor "
                    "(torch is not installed); for other DLPack tensors use xstage.attention_dlpack")


def _torch_layer():
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


def __getattr__(name: str):
    # Lazy: the first access imports torch and registers the xstage::attention custom op.
    if name == "attention":
        layer = _torch_layer()
        fn = layer.attention if layer else _attention_without_torch
        globals()["attention"] = fn
        return fn
    if name == "planner":
        from . import planner
        return planner
    if name in ("distributed", "ulysses_attention"):  # xstage/distributed.py (imports torch, then the library)
        distributed = __import__("importlib").import_module(".distributed", __name__)
        return distributed if name == "distributed" else distributed.ulysses_attention
    if name in ("moe", "FusedMoE", "fused_moe", "quantize_fp8_blocks"):  # xstage/moe.py (torch parts lazy)
        moe = __import__("importlib").import_module(".moe", __name__)  # `from . import` would recurse here
        return moe if name == "moe" else getattr(moe, name)
    raise AttributeError(f"module 'xstage' has no attribute {name!r}")
