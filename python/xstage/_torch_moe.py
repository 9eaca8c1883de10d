"""PyTorch layer of the fused MoE (layouts and rules: xstage/moe.py): ``FusedMoE``, ``fused_moe``,
``quantize_fp8_blocks`` and the ``xstage::fused_moe`` custom op (with a fake kernel, so torch.compile
traces through it); the eager path calls the C ABI directly. Imported on first use of those names.
"""

# No `from __future__ import annotations`: torch.library.custom_op reads the op's annotations as objects.
import threading
from typing import Any, Callable, Optional

import torch

from . import _native
from ._moe_abi import PRECISIONS, _choice, _Layer, _layers, _lib, _register

_MAX_NDIM = _native.TensorSlot.MAX_NDIM
_BF16, _F32, _I32, _U8 = torch.bfloat16, torch.float32, torch.int32, torch.uint8
_FP8 = getattr(torch, "float8_e4m3fn", None)
_CODES = {_BF16: (_native.KDL_BFLOAT, 16), _F32: (_native.KDL_FLOAT, 32), _I32: (_native.KDL_INT, 32),
          _U8: (_native.KDL_UINT, 8)}
if _FP8 is not None:
    _CODES[_FP8] = (_native.KDL_UINT, 8)  # e4m3 bytes (DLPack 0.6 has no float8 code)
_is_compiling = torch.compiler.is_compiling
def _current_stream(index: int) -> int:
    return torch.cuda.current_stream(index).cuda_stream


# no Stream object per call (absent from CPU-only torch builds)
_raw_stream: Callable[[int], int] = getattr(torch._C, "_cuda_getCurrentRawStream", _current_stream)


def _fill(slot, t) -> int:
    """Describes tensor `t` in `slot` (no copy, no DLPack capsule); returns the slot's address. dtype,
    device and rank are rewritten only when they change (_native.TensorSlot)."""
    dl = slot.dl
    dl.data = t.data_ptr()
    dtype = t.dtype
    if dtype is not slot.dtype:
        dl.dtype_code, dl.dtype_bits = _CODES.get(dtype, (255, 0))  # an unknown dtype is named by the C ABI
        slot.dtype = dtype
    device = t.get_device() if t.is_cuda else -1
    if device != slot.device:
        dl.device_type = _native.KDL_CUDA if device >= 0 else _native.KDL_CPU
        dl.device_id = max(device, 0)
        slot.device = device
    n = t.dim()
    if n != slot.ndim:
        if n > _MAX_NDIM:
            raise ValueError(f"tensor of {n} dimensions; accepted: at most {_MAX_NDIM}")
        slot.set_ndim(n)
    slot.pack(slot.dims, 0, *t.shape, *t.stride())
    return slot.address


def _require_tensor(t, name, where):
    if not isinstance(t, torch.Tensor):
        kind = type(t)
        raise TypeError(f"{where}: {name} is a {kind.__module__}.{kind.__qualname__}; accepted: a torch.Tensor")


def _check_routing(x, topk_ids, topk_weights, hidden, top_k, max_tokens, device, where):
    """Dtype, device and shape checks of one call (before any launch); returns the 2-D operands."""
    for name, t in (("x", x), ("topk_ids", topk_ids), ("topk_weights", topk_weights)):
        _require_tensor(t, name, where)
    if x.dtype != _BF16:
        raise TypeError(f"{where}: x has dtype {x.dtype}; accepted: torch.bfloat16")
    if topk_ids.dtype not in (_I32, torch.int64):
        raise TypeError(f"{where}: topk_ids has dtype {topk_ids.dtype}; accepted: torch.int32 or torch.int64")
    if not topk_weights.is_floating_point():
        raise TypeError(f"{where}: topk_weights has dtype {topk_weights.dtype}; accepted: a floating dtype (float32)")
    for name, t in (("x", x), ("topk_ids", topk_ids), ("topk_weights", topk_weights)):
        if not t.is_cuda or t.get_device() != device:
            raise ValueError(f"{where}: {name} is on {t.device}; accepted: cuda:{device} (the layer's device)")
    if x.dim() < 1 or x.shape[-1] != hidden:
        raise ValueError(f"{where}: x has shape {tuple(x.shape)}; accepted: [..., {hidden}] (hidden = {hidden})")
    tokens = x.numel() // hidden
    for name, t in (("topk_ids", topk_ids), ("topk_weights", topk_weights)):
        if t.dim() != 2 or t.shape[0] != tokens or t.shape[1] != top_k:
            raise ValueError(f"{where}: {name} has shape {tuple(t.shape)}; accepted: [{tokens}, {top_k}] "
                             f"([tokens of x, top_k])")
    if tokens > max_tokens:
        raise ValueError(f"{where}: x carries {tokens} tokens, more than the layer's max_tokens {max_tokens} "
                         "(create the layer with a larger max_tokens, or call reserve())")
    x2 = x.reshape(tokens, hidden)
    if not x2.is_contiguous():
        x2 = x2.contiguous()
    ids = topk_ids if topk_ids.dtype == _I32 and topk_ids.is_contiguous() else topk_ids.to(_I32).contiguous()
    wts = topk_weights if topk_weights.dtype == _F32 and topk_weights.is_contiguous() else \
        topk_weights.to(_F32).contiguous()
    return x2, ids, wts


def _precision_of(w1, where) -> str:
    if w1.dtype == _BF16:
        return "bf16"
    if w1.dtype == _U8 or (_FP8 is not None and w1.dtype == _FP8):
        return "fp8"
    raise TypeError(f"{where}: w1 has dtype {w1.dtype}; accepted: torch.bfloat16, or torch.float8_e4m3fn / "
                    "torch.uint8 (fp8, with w1_scale and w2_scale)")


def _weight_dims(w1, w2, where):
    for name, w in (("w1", w1), ("w2", w2)):
        _require_tensor(w, name, where)
        if w.dim() != 3:
            raise ValueError(f"{where}: {name} has shape {tuple(w.shape)}; accepted: 3 dimensions "
                             f"({'[experts, 2*h_inter, hidden]' if name == 'w1' else '[experts, hidden, h_inter]'})")
    experts, two_inter, hidden = w1.shape
    if two_inter % 2:
        raise ValueError(f"{where}: w1 has shape {tuple(w1.shape)}; dimension 1 (2*h_inter) must be even")
    h_inter = two_inter // 2
    if tuple(w2.shape) != (experts, hidden, h_inter):
        raise ValueError(f"{where}: w2 has shape {tuple(w2.shape)}; accepted: [{experts}, {hidden}, {h_inter}] "
                         "(from w1: [experts, hidden, h_inter])")
    # Order of the checks (each bad argument is named the same way on any machine): tensor type, shape,
    # dtype, then device, so a wrong dtype is reported as such on CPU-only machines too.
    _precision_of(w1, where)
    if w2.dtype != w1.dtype:
        raise TypeError(f"{where}: w2 has dtype {w2.dtype}, w1 {w1.dtype}; accepted: the same dtype")
    if not w1.is_cuda or w2.device != w1.device:
        raise ValueError(f"{where}: w1 is on {w1.device}, w2 on {w2.device}; accepted: one CUDA device")
    return int(experts), int(hidden), int(h_inter)


def _as_bytes(w):
    return w if w.dtype == _U8 else w.view(_U8)


def _set_weights(layer: _Layer, w1, w2, w1_scale, w2_scale, where) -> None:
    s = layer.slots
    fp8 = layer.precision == "fp8"
    if fp8 and (w1_scale is None or w2_scale is None):
        raise ValueError(f"{where}: {'w1_scale' if w1_scale is None else 'w2_scale'} is None; fp8 weights need "
                         "their block scales")
    a1 = _fill(s[4], _as_bytes(w1) if fp8 else w1)
    a2 = _fill(s[5], _as_bytes(w2) if fp8 else w2)
    a3 = _fill(s[6], w1_scale) if w1_scale is not None else None
    a4 = _fill(s[7], w2_scale) if w2_scale is not None else None
    layer.set_weights(a1, a2, a3, a4, where)


def _run_layer(layer: _Layer, x, topk_ids, topk_weights, w1, w2, w1_scale, w2_scale, where):
    """The computation (eager path and the custom op's implementation): checks, one launch on the current
    stream; returns y with x's shape."""
    x2, ids, wts = _check_routing(x, topk_ids, topk_weights, layer.hidden, layer.top_k, layer.max_tokens,
                                  layer.device, where)
    _set_weights(layer, w1, w2, w1_scale, w2_scale, where)
    y = torch.empty_like(x2)
    if x2.shape[0] > 0 or layer.team is not None:  # a team rank without tokens still serves the others
        layer.resolve(x2.shape[0], where)  # schedule "auto": the order predicted for this many tokens
        s = layer.slots
        layer.run(_fill(s[0], x2), _fill(s[1], ids), _fill(s[2], wts), _fill(s[3], y), _raw_stream(layer.device),
                  where)
    return y.view(x.shape)


@torch.library.custom_op("xstage::fused_moe", mutates_args=(), device_types="cuda")
def fused_moe_op(x: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor, w1: torch.Tensor,
                 w2: torch.Tensor, w1_scale: Optional[torch.Tensor], w2_scale: Optional[torch.Tensor],
                 layer_id: int) -> torch.Tensor:
    """y = the layer `layer_id` (FusedMoE / fused_moe) applied to x with the routing and these weights."""
    return _run_layer(_layers[layer_id], x, topk_ids, topk_weights, w1, w2, w1_scale, w2_scale, "xstage::fused_moe")


@fused_moe_op.register_fake
def _fused_moe_fake(x, topk_ids, topk_weights, w1, w2, w1_scale, w2_scale, layer_id):
    return x.new_empty(x.shape)  # contiguous, as the real output


def _forward(layer_id, layer, x, topk_ids, topk_weights, w1, w2, w1_scale, w2_scale, where):
    """The op under torch.compile; the direct call otherwise (the eager fast path: no dispatcher)."""
    if _is_compiling():
        return torch.ops.xstage.fused_moe(x, topk_ids, topk_weights, w1, w2, w1_scale, w2_scale, layer_id)
    return _run_layer(layer, x, topk_ids, topk_weights, w1, w2, w1_scale, w2_scale, where)


def quantize_fp8_blocks(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """bf16 weights [rows, cols] or [matrices, rows, cols] (rows, cols multiples of 128) -> (q, scales):
    q torch.float8_e4m3fn of w's shape and float32 scales [..., rows/128, cols/128], one per 128 x 128
    block (scale = block amax / 448; q = nearest e4m3 of w * (1 / scale), saturating), on the current
    stream: the rule of the fused kernel's FP8 weights."""
    where = "xstage.quantize_fp8_blocks"
    _require_tensor(w, "w", where)
    if w.dtype != _BF16:
        raise TypeError(f"{where}: w has dtype {w.dtype}; accepted: torch.bfloat16")
    if not w.is_cuda:
        raise ValueError(f"{where}: w is on {w.device}; accepted: a CUDA tensor")
    if w.dim() not in (2, 3) or w.shape[-1] % 128 or w.shape[-2] % 128 or w.numel() == 0:
        raise ValueError(f"{where}: w has shape {tuple(w.shape)}; accepted: [rows, cols] or [matrices, rows, cols] "
                         "with rows and cols positive multiples of 128")
    w = w.contiguous()
    q = torch.empty(w.shape, dtype=_U8, device=w.device)
    scales = torch.empty((*w.shape[:-2], w.shape[-2] // 128, w.shape[-1] // 128), dtype=_F32, device=w.device)
    slots = [_native.TensorSlot() for _ in range(3)]
    status = _lib().xstage_moe_quantize_fp8(_fill(slots[0], w), _fill(slots[1], q), _fill(slots[2], scales),
                                            _raw_stream(w.get_device()) or None)
    if status != _native.OK:
        _native.raise_for(status, where)
    return (q.view(_FP8) if _FP8 is not None else q), scales


_functional_lock = threading.Lock()
_functional_layers: dict[tuple, tuple] = {}  # (device, experts, hidden, h_inter, top_k, precision, schedule) -> (id, layer)


def fused_moe(x: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor, w1: torch.Tensor,
              w2: torch.Tensor, *, w1_scale: Optional[torch.Tensor] = None, w2_scale: Optional[torch.Tensor] = None,
              schedule: str = "auto", max_tokens: Optional[int] = None) -> torch.Tensor:
    """Functional form: y = the MoE layer of (w1, w2) on x with the caller's routing. Layers (with their
    workspaces) are cached per (device, shape, precision, schedule); a call with more tokens than the
    cached layer's max_tokens replaces it by one for max(max_tokens, tokens) (an allocation). Under
    torch.compile, prefer FusedMoE (its layer exists before tracing)."""
    where = "xstage.fused_moe"
    experts, hidden, h_inter = _weight_dims(w1, w2, where)
    precision = _precision_of(w1, where)
    _require_tensor(x, "x", where)
    _require_tensor(topk_ids, "topk_ids", where)
    if topk_ids.dim() != 2:
        raise ValueError(f"{where}: topk_ids has shape {tuple(topk_ids.shape)}; accepted: [tokens, top_k]")
    top_k = int(topk_ids.shape[1])
    tokens = x.numel() // hidden
    device = w1.get_device()
    key = (device, experts, hidden, h_inter, top_k, precision, schedule)
    want = max(int(max_tokens or 0), tokens, 1)
    with _functional_lock:
        entry = _functional_layers.get(key)
        if entry is None or entry[1].max_tokens < want:
            layer = _Layer(where, device, hidden, h_inter, experts, top_k, want, precision, schedule)
            entry = (_register(layer), layer)
            _functional_layers[key] = entry
    return _forward(entry[0], entry[1], x, topk_ids, topk_weights, w1, w2, w1_scale, w2_scale, where)


def _module_weights(w1, w2, precision, w1_scale, w2_scale, where):
    """The checks of a module's weights (FusedMoE here and in xstage.distributed): shapes, dtype, device, the
    precision (None: from w1's dtype) and the FP8 scales; returns (experts, hidden, h_inter, precision)."""
    experts, hidden, h_inter = _weight_dims(w1, w2, where)
    inferred = _precision_of(w1, where)
    if precision is None:
        precision = inferred
    _choice(precision, PRECISIONS, "precision", where)
    if precision != inferred:
        raise TypeError(f"{where}: precision {precision!r} but w1 has dtype {w1.dtype} ({inferred} weights); "
                        "FusedMoE.from_bf16(..., precision='fp8') quantizes bf16 weights")
    if precision == "fp8":
        for name, s in (("w1_scale", w1_scale), ("w2_scale", w2_scale)):
            if s is None:
                raise ValueError(f"{where}: {name} is None; fp8 weights need their block scales")
            _require_tensor(s, name, where)
    elif w1_scale is not None or w2_scale is not None:
        raise ValueError(f"{where}: {'w1_scale' if w1_scale is not None else 'w2_scale'} given for bf16 "
                         "weights; accepted: None")
    return experts, hidden, h_inter, precision


def _from_bf16(cls, w1, w2, top_k, precision, kwargs):
    """cls (a FusedMoE module class) from bf16 weights, quantized on the device first for precision "fp8"."""
    if precision == "fp8":
        q1, s1 = quantize_fp8_blocks(w1)
        q2, s2 = quantize_fp8_blocks(w2)
        return cls(q1, q2, top_k=top_k, precision="fp8", w1_scale=s1, w2_scale=s2, **kwargs)
    return cls(w1, w2, top_k=top_k, precision=precision, **kwargs)


class FusedMoE(torch.nn.Module):
    """The fused MoE layer with its weights given once (layouts: xstage.moe).

    FusedMoE(w1, w2, top_k=..., precision=None (from w1's dtype) | "bf16" | "fp8", w1_scale=None,
             w2_scale=None, schedule="auto" | "interleaved" | "wave", max_tokens=16384)
    forward(x, topk_ids, topk_weights) -> y (x's shape, bf16), with the caller's routing.
    FusedMoE.from_bf16(w1, w2, top_k=..., precision="fp8") quantizes bf16 weights on the device.
    The weights are buffers of the module (moved by .to()); inference only.
    """

    def __init__(self, w1: torch.Tensor, w2: torch.Tensor, *, top_k: int, precision: Optional[str] = None,
                 w1_scale: Optional[torch.Tensor] = None, w2_scale: Optional[torch.Tensor] = None,
                 schedule: str = "auto", max_tokens: int = 16384, lead_rows: int = 0,
                 experts_per_wave: int = 0) -> None:
        super().__init__()
        where = "xstage.FusedMoE"
        experts, hidden, h_inter, precision = _module_weights(w1, w2, precision, w1_scale, w2_scale, where)
        self._layer = _Layer(where, w1.get_device(), hidden, h_inter, experts, top_k, max_tokens, precision, schedule,
                             lead_rows, experts_per_wave)
        self._layer_id = _register(self._layer)
        self.top_k = top_k
        self.precision = precision
        self.register_buffer("w1", w1)
        self.register_buffer("w2", w2)
        self.register_buffer("w1_scale", w1_scale)
        self.register_buffer("w2_scale", w2_scale)
        _set_weights(self._layer, w1, w2, w1_scale, w2_scale, where)  # bad weights fail now, not at forward

    @classmethod
    def from_bf16(cls, w1: torch.Tensor, w2: torch.Tensor, *, top_k: int, precision: str = "bf16",
                  **kwargs: Any) -> "FusedMoE":
        """The layer of bf16 weights w1 [E, 2*h_inter, hidden] and w2 [E, hidden, h_inter]: kept as they are for
        precision "bf16", quantized on the device (quantize_fp8_blocks: e4m3 with 128 x 128 block scales) for
        "fp8". `top_k` is required; the other keywords are the constructor's."""
        return _from_bf16(cls, w1, w2, top_k, precision, kwargs)

    @property
    def max_tokens(self) -> int:
        """The most tokens one forward takes (the workspace's size; reserve() grows it)."""
        return self._layer.max_tokens

    @property
    def schedule(self) -> str:
        """The tile order asked for: "auto" (the default: the simulator's choice for each call's token count),
        "interleaved" or "wave"."""
        return self._layer.schedule

    def set_schedule(self, schedule: str, lead_rows: int = 0, experts_per_wave: int = 0) -> None:
        """Sets the tile order of later calls: "auto" (the order the simulator predicts faster for each call's
        token count under balanced routing, as `xstage moe bench --schedule auto`), "interleaved" (`lead_rows`:
        Linear-1 rows issued ahead, 0 for the kernel's default) or "wave" (`experts_per_wave`, 0 for the
        default). Raises ValueError naming a bad value."""
        self._layer.set_schedule(schedule, lead_rows, experts_per_wave, "xstage.FusedMoE.set_schedule")

    def reserve(self, max_tokens: int) -> None:
        """Grows the workspace to max_tokens: a new allocation (the old one is freed once unused). A model
        compiled with torch.compile must be compiled again afterwards (the layer id is a constant there)."""
        old = self._layer
        if max_tokens > old.max_tokens:
            self._layer = _Layer("xstage.FusedMoE.reserve", old.device, old.hidden, old.h_inter, old.experts,
                                 old.top_k, max_tokens, old.precision, old.schedule, old.lead_rows,
                                 old.experts_per_wave)
            self._layer_id = _register(self._layer)

    def info(self) -> dict:
        """grid, schedule_param (lead rows or experts per wave, as launched) and runs so far."""
        return self._layer.info()

    def last_failure(self) -> str:
        """The in-kernel wait that expired in an earlier run ("" when none)."""
        return self._layer.last_failure()

    def forward(self, x: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor) -> torch.Tensor:
        """y = the MoE layer on x [..., hidden] bf16 with the caller's routing: topk_ids [T, top_k] int32/int64
        (distinct experts per token), topk_weights [T, top_k]; y has x's shape, bf16. Runs on the current CUDA
        stream without synchronizing; T at most max_tokens (ValueError otherwise)."""
        return _forward(self._layer_id, self._layer, x, topk_ids, topk_weights, self.w1, self.w2, self.w1_scale,
                        self.w2_scale, "xstage.FusedMoE")

    def extra_repr(self) -> str:
        la = self._layer
        return (f"experts={la.experts}, hidden={la.hidden}, h_inter={la.h_inter}, top_k={la.top_k}, "
                f"precision={la.precision}, schedule={la.schedule}, max_tokens={la.max_tokens}")


__all__ = ["FusedMoE", "fused_moe", "quantize_fp8_blocks", "fused_moe_op"]
