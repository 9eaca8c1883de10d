"""xstage's kernel behind `torch.nn.functional.scaled_dot_product_attention` (torch 2.10 on).

`torch.nn.attention.activate_flash_attention_impl("xstage")` replaces the CUDA kernel of
`aten::_scaled_dot_product_flash_attention`, the op SDPA calls when it picks its flash backend. Each call the kernel
takes runs on it: bfloat16 q, k, v of one Hopper (sm_90) device, [B, H, S, D] with D 64 or 128, as many key/value
heads as query heads, no dropout, not causal, no input requiring grad, any scale. Every other call goes to the kernel
PyTorch had registered before (torch.library.get_kernel), unchanged. `restore_flash_attention_impl()` (or activating
another implementation) removes ours. SDPA calls with a mask never reach this op (PyTorch picks another backend).

SDPA tries its backends in a priority order, and on sm_90 and sm_100 PyTorch puts cuDNN first (its own
`check_prefer_cudnn_attention`, unless TORCH_CUDNN_SDPA_PREFERRED=0): the flash op, and so xstage, would then see no
call on a Hopper GPU. Activating therefore also moves the flash backend to the front of that order (the others keep
their relative order); removing puts the order back as it was. A call the kernel declines then runs on PyTorch's
flash kernel where that applies, else on the next backend in the order.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Callable

import torch

from . import _native

OP = "aten::_scaled_dot_product_flash_attention"
HEAD_DIMS = (64, 128)

_served = 0
_passed = 0


@dataclasses.dataclass
class Handle:
    """What torch keeps while "xstage" is active; remove() gives the op back its previous CUDA kernel and SDPA its
    previous backend priority order."""
    library: Any
    previous_order: list[int] | None = None

    def remove(self) -> None:
        if self.library is not None:
            self.library._destroy()
            self.library = None
        if self.previous_order is not None:
            torch._C._set_sdp_priority_order(self.previous_order)
            self.previous_order = None


def flash_first() -> list[int] | None:
    """Puts SDPA's flash backend first in its priority order; returns the order before, or None where this torch
    has no priority order to set."""
    get_order = getattr(torch._C, "_get_sdp_priority_order", None)
    set_order = getattr(torch._C, "_set_sdp_priority_order", None)
    if get_order is None or set_order is None:
        return None
    if torch.cuda.is_available():
        # PyTorch installs its default order (cuDNN first on sm_90/sm_100) at its first backend selection, over
        # any order set before: select once on a tiny input so that ours is set after that.
        t = torch.empty((1, 1, 8, 64), device="cuda", dtype=torch.bfloat16)
        torch.ops.aten._fused_sdp_choice(t, t, t)
    previous = [int(b) for b in get_order()]
    flash = torch.nn.attention.SDPBackend.FLASH_ATTENTION.value  # an int (the stubs type the enum without __int__)
    set_order([flash] + [b for b in previous if b != flash])
    return previous


def counts() -> dict[str, int]:
    """SDPA flash calls served by xstage and passed on to PyTorch's kernel since the process started."""
    return {"served": _served, "passed": _passed}


@functools.lru_cache(maxsize=None)
def _hopper(index: int) -> bool:
    return torch.cuda.get_device_capability(index)[0] == 9


def refusal(query: Any, key: Any, value: Any, dropout_p: float = 0.0, is_causal: bool = False,
            return_debug_mask: bool = False, scale: float | None = None) -> str | None:
    """Why xstage's kernel does not serve this SDPA flash call (the argument and value), or None if it does."""
    if dropout_p:
        return f"dropout_p={dropout_p!r}"
    if is_causal:
        return "is_causal=True"
    if return_debug_mask:
        return "return_debug_mask=True"
    if scale is not None and not (isinstance(scale, (int, float)) and scale > 0 and math.isfinite(scale)):
        return f"scale={scale!r}"
    for name, t in (("query", query), ("key", key), ("value", value)):
        if t.dtype != torch.bfloat16:
            return f"{name}.dtype={t.dtype}"
        if t.dim() != 4:
            return f"{name}.dim()={t.dim()}"
    if key.shape != value.shape or key.shape[0] != query.shape[0] or key.shape[1] != query.shape[1] \
            or key.shape[3] != query.shape[3]:
        return f"shapes query {tuple(query.shape)}, key {tuple(key.shape)}, value {tuple(value.shape)}"
    if query.shape[3] not in HEAD_DIMS:
        return f"head_dim={query.shape[3]}"
    if torch.is_grad_enabled() and (query.requires_grad or key.requires_grad or value.requires_grad):
        return "requires_grad=True"
    if not (query.is_cuda and key.device == query.device and value.device == query.device):
        return f"device={query.device}"
    if not _hopper(query.get_device()):
        return "device capability (sm_90 only)"
    return None


def serve(query: Any, key: Any, value: Any, scale: float | None) -> tuple[Any, Any]:
    """(out, logsumexp) of one call on xstage's kernel: out [B, H, Sq, D] bfloat16 (a view of [B, Sq, H, D] memory,
    as PyTorch's flash kernel returns it), logsumexp [B, H, Sq] float32."""
    from . import _torch_attention

    q, k, v = (t.transpose(1, 2) for t in (query, key, value))
    out, lse = _torch_attention._forward(q, k, v, 0.0 if scale is None else float(scale), True,
                                         _native.PRECISIONS["bf16"])
    return out.transpose(1, 2), lse


def make_kernel(original: Any, serve_fn: Callable[..., tuple[Any, Any]] = serve,
                refusal_fn: Callable[..., str | None] = refusal) -> Callable[..., Any]:
    """The CUDA kernel registered for OP: `serve_fn` where `refusal_fn` finds nothing, else `original`
    (a torch._C._SafeKernelFunction) with the call unchanged."""

    def kernel(keyset: Any, query: Any, key: Any, value: Any, dropout_p: float = 0.0, is_causal: bool = False,
               return_debug_mask: bool = False, *, scale: float | None = None) -> Any:
        global _served, _passed
        if refusal_fn(query, key, value, dropout_p, is_causal, return_debug_mask, scale) is not None:
            _passed += 1
            return original.call_boxed(keyset, query, key, value, dropout_p, is_causal, return_debug_mask,
                                       scale=scale)
        out, lse = serve_fn(query, key, value, scale)
        _served += 1
        rng_state = torch.zeros((2,), dtype=torch.uint64, device=query.device)
        philox_offset = torch.zeros((), dtype=torch.uint64, device=query.device)
        debug_mask = torch.empty(0, dtype=query.dtype, device=query.device)
        return out, lse, None, None, query.shape[2], key.shape[2], rng_state, philox_offset, debug_mask

    return kernel


def activate() -> Handle:
    """Registers the kernel for OP on CUDA in front of PyTorch's (the register_fn of the "xstage" implementation)."""
    get_kernel = getattr(torch.library, "get_kernel", None)
    if get_kernel is None:
        raise RuntimeError(f"xstage: torch {torch.__version__} has no torch.library.get_kernel, which the SDPA "
                           "route needs to leave unsupported calls to PyTorch (torch 2.10 or later)")
    original = get_kernel(OP, "CUDA")
    library = torch.library.Library("aten", "IMPL", "CUDA")  # noqa: TOR901
    library.impl("_scaled_dot_product_flash_attention", make_kernel(original), "CUDA", with_keyset=True)
    return Handle(library, flash_first())
