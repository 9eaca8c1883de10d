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

import importlib as _importlib
import typing as _typing

from . import _sdpa_registration
from ._attention_api import attention_without_torch as _attention_without_torch
from ._dlpack import attention_dlpack, attention_workspace_bytes
from ._native import XstageLoadError, build_info, has_cuda

if _typing.TYPE_CHECKING:  # the lazy attributes, for type checkers
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


def _torch_layer() -> _typing.Any:
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


if _typing.TYPE_CHECKING:
    def attention(q: _typing.Any, k: _typing.Any, v: _typing.Any, *, softmax_scale: float | None = None,
                  return_lse: bool = False, precision: str = "bf16", layout: str = "bshd", scale: float | None = None,
                  causal: bool = False, is_causal: bool = False, dropout_p: float = 0.0) -> _typing.Any: ...


def __getattr__(name: str) -> _typing.Any:
    # Lazy: the first access to `attention` imports torch and registers the xstage::attention custom op.
    if name == "attention":
        layer = _torch_layer()
        fn = layer.attention if layer else _attention_without_torch
        globals()["attention"] = fn
        return fn
    lazy = _LAZY.get(name)
    if lazy is not None:
        module = _importlib.import_module(lazy[0], __name__)  # `from . import` would recurse here
        return module if lazy[1] is None else getattr(module, lazy[1])
    raise AttributeError(f"module 'xstage' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


_sdpa_registration.install()
