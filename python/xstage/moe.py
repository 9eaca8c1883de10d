"""Fused MoE layer on one GPU (expert parallelism 1): ``xstage.FusedMoE``, ``xstage.fused_moe`` and
``xstage.quantize_fp8_blocks``, over the C ABI of include/xstage/c_api_moe.h.

    y[t] = sum_j topk_weights[t, j] * W2[e] @ (silu(W1_gate[e] @ x[t]) * (W1_up[e] @ x[t])),  e = topk_ids[t, j]

One persistent Hopper kernel does dispatch, Linear-1 + SwiGLU, Linear-2 and the weighted combine; bf16,
or FP8 e4m3 W8A8 (activations quantized per token per 128 channels inside the kernel, weights e4m3 with
one float32 scale per 128 x 128 block). Layouts:

    x             bfloat16 [T, hidden]  (or [..., hidden]; y has x's shape)
    topk_ids      int32 or int64 [T, top_k]: distinct experts in [0, experts) per token. The kernel does
                  not check them: an id out of range or repeated within a token leaves that token's
                  output undefined (no memory outside the buffers is touched). They are the caller's.
    topk_weights  float32 (bf16 / fp16 are converted) [T, top_k]
    w1            [experts, 2 * h_inter, hidden]: rows 0 .. h_inter-1 the gate projection, then the up one
    w2            [experts, hidden, h_inter]
    fp8:          w1, w2 as torch.float8_e4m3fn (or uint8 bytes) with w1_scale float32
                  [experts, 2*h_inter/128, hidden/128] and w2_scale [experts, hidden/128, h_inter/128]
                  (quantize_fp8_blocks makes them from bf16 weights with the kernel's rule).

A layer owns a workspace sized for ``max_tokens``; more tokens in one call raise ValueError (create
the layer with a larger max_tokens, or call ``FusedMoE.reserve``). Calls run on the current CUDA
stream and do not synchronize. Runs of one layer are ordered on the device, even across streams.
Inference only (no autograd). CUDA graphs cannot capture a run.

``import xstage`` works without PyTorch; the torch parts import it on first use.
"""

import typing as _typing

from ._moe_abi import ORDERS, PRECISIONS, SCHEDULES, builtin_shapes, can_implement, predict_schedule

__all__ = ["FusedMoE", "ORDERS", "PRECISIONS", "SCHEDULES", "builtin_shapes", "can_implement", "fused_moe",
           "predict_schedule", "quantize_fp8_blocks"]

for _f in (builtin_shapes, can_implement, predict_schedule):
    _f.__module__ = __name__  # documented (pydoc, help) as this module's, where they are public
del _f

if _typing.TYPE_CHECKING:  # the lazy attributes, for type checkers
    from ._torch_moe import FusedMoE, fused_moe, quantize_fp8_blocks

_TORCH_NAMES = ("FusedMoE", "fused_moe", "quantize_fp8_blocks")


def __getattr__(name: str) -> _typing.Any:
    # The torch layer (_torch_moe) is imported on first use, so `import xstage.moe` needs no torch.
    if name in _TORCH_NAMES:
        try:
            from . import _torch_moe
        except ImportError as e:
            if "torch" not in str(e):
                raise
            raise ImportError(f"xstage.{name} needs PyTorch (pip install torch)") from e
        return getattr(_torch_moe, name)
    raise AttributeError(f"module 'xstage.moe' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
