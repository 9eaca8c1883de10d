"""PyTorch layer of the attention forward: the `xstage::attention` custom op (with a fake kernel, so
torch.compile(fullgraph=True) traces through it) and an eager fast path that calls the C ABI directly.

Imported on first use of `xstage.attention`, so `import xstage` needs no torch.
"""

# No `from __future__ import annotations` here: torch.library infers the op's schema from real annotations.
import ctypes
import numbers
import threading
from typing import Any, Callable

import torch

from . import _native
from ._attention_api import ATTENTION_DOC
from ._dlpack import _describe, _precision_arg, _scale_arg

_WHERE = "xstage.attention"
_BF16 = torch.bfloat16
_F32 = torch.float32
_NAMES = ("q", "k", "v", "out", "lse", "workspace")
_BF16_CODE = _native.PRECISIONS["bf16"]
_FP8_CODE = _native.PRECISIONS["fp8"]
_U8 = torch.uint8
_DTYPES = {  # torch dtype -> DLPack (code, bits), for the library's checks and messages
    torch.bfloat16: (_native.KDL_BFLOAT, 16),
    torch.float16: (_native.KDL_FLOAT, 16),
    torch.float32: (_native.KDL_FLOAT, 32),
    torch.float64: (_native.KDL_FLOAT, 64),
    torch.int8: (_native.KDL_INT, 8),
    torch.int16: (_native.KDL_INT, 16),
    torch.int32: (_native.KDL_INT, 32),
    torch.int64: (_native.KDL_INT, 64),
    torch.uint8: (_native.KDL_UINT, 8),
}
_MAX_NDIM = _native.TensorSlot.MAX_NDIM
_empty_like = torch.empty_like
_CONTIGUOUS = torch.contiguous_format

_lib = _native.lib()  # loaded when the torch layer is first used
_tls = threading.local()
_copies_lock = threading.Lock()
_copies = 0  # q, k or v views the kernel could not read in place, copied to contiguous tensors
# (q.shape, k.shape, precision, device) -> workspace bytes: one C call per distinct shape, not per call. Bounded: a
# model has a handful of attention shapes; a run of many shapes only clears it now and then.
_workspace_bytes_cache: dict[tuple, int] = {}
_WORKSPACE_CACHE_SIZE = 256

def _current_stream(index: int) -> int:
    return torch.cuda.current_stream(index).cuda_stream


# what inductor uses: no Stream object per call (absent from older or CPU-only torch builds)
_raw_stream: Callable[[int], int] = getattr(torch._C, "_cuda_getCurrentRawStream", _current_stream)


def copy_count() -> int:
    """How many q/k/v inputs were copied because the kernel cannot read their strided view in place."""
    return _copies


def _slots():
    """The calling thread's six tensor slots (q, k, v, out, lse, workspace) and the call struct pointing at
    the first four."""
    try:
        return _tls.slots
    except AttributeError:
        slots = [_native.TensorSlot() for _ in _NAMES]
        call = _native.AttentionCall()
        call.q, call.k, call.v, call.out = (slot.address for slot in slots[:4])
        _tls.slots = (slots, call, ctypes.addressof(call))
        return _tls.slots


def _fill(slot, t: torch.Tensor, name: str, data: int) -> None:
    """Describes tensor `t` (data address `data`) in `slot`, without a DLPack capsule."""
    dl = slot.dl
    dl.data = data
    dtype = t.dtype
    if dtype is not slot.dtype:
        code_bits = _DTYPES.get(dtype)
        if code_bits is None:
            raise TypeError(f"{_WHERE}: {name}: dtype {str(dtype).replace('torch.', '')}; accepted: bfloat16")
        dl.dtype_code, dl.dtype_bits = code_bits
        slot.dtype = dtype
    device = t.get_device() if t.is_cuda else -1
    if device < 0 or device != slot.device:
        if device >= 0:
            dl.device_type = _native.KDL_CUDA
            dl.device_id = device
        else:
            dl.device_type = _native.KDL_CPU if t.device.type == "cpu" else 0
            dl.device_id = 0
        slot.device = device
    shape = t.shape
    n = len(shape)
    if n != slot.ndim:
        if n > _MAX_NDIM:
            raise ValueError(f"{_WHERE}: {name}: rank {n} (shape {list(shape)}); accepted: 4 "
                             "([batch, seq, heads, head_dim])")
        slot.set_ndim(n)
    slot.pack(slot.dims, 0, *shape, *t.stride())


def _check_tensor_type(name: str, t) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{_WHERE}: {name} is a {_describe(t)}; accepted: a torch.Tensor "
                        "(bfloat16, on a CUDA device); for other DLPack tensors use xstage.attention_dlpack")


def _outputs(q: torch.Tensor, return_lse: bool):
    # empty_like skips building a device object and parsing a shape (about 2 us less per call than
    # torch.empty(q.shape, dtype=..., device=q.device)); contiguous whatever q's strides.
    if q.dtype is _BF16:
        out = _empty_like(q, memory_format=_CONTIGUOUS)
    else:  # q is refused by the checks before any launch; out is still what the op's schema promises
        out = torch.empty(q.shape, dtype=_BF16, device=q.device)
    lse = None
    if return_lse and q.dim() == 4:
        lse = torch.empty((q.shape[0], q.shape[2], q.shape[1]), dtype=_F32, device=q.device)
    return out, lse


def _workspace_bytes(q, k, precision: int) -> int:
    """Device bytes of the workspace of a `precision` call on q and k (the library's layout), cached per shape."""
    key = (q.shape, k.shape, precision, q.get_device())  # bf16's size is the device's schedule
    n = _workspace_bytes_cache.get(key)
    if n is not None:
        return n
    slots = _slots()[0]
    _fill(slots[0], q, "q", q.data_ptr())
    _fill(slots[1], k, "k", k.data_ptr())
    out = ctypes.c_uint64()
    status = _lib.xstage_attention_workspace_bytes(slots[0].address, slots[1].address, precision, ctypes.byref(out))
    if status != _native.OK:
        _native.raise_for(status, _WHERE)
    if len(_workspace_bytes_cache) >= _WORKSPACE_CACHE_SIZE:
        _workspace_bytes_cache.clear()
    _workspace_bytes_cache[key] = out.value
    return out.value


def _workspace(q, k, precision: int):
    """The call's scratch buffer (the FP8 pre-pass's, or bf16's split tail's where its shape splits; None where it
    needs none), from the caching allocator: freed when the call returns, its block is reused by later work of the
    same stream only after this call's."""
    if not q.is_cuda:
        return None  # refused by the call's own checks
    n = _workspace_bytes(q, k, precision)
    return torch.empty((n,), dtype=_U8, device=q.device) if n > 0 else None


def _prepare(q, k, v, out, lse, scale: float, precision: int = _BF16_CODE, workspace=None) -> int:
    """Describes one launch in the calling thread's call struct; returns the struct's address (the argument of
    xstage_attention_forward_call). No check here: the C ABI checks everything before it launches."""
    slots, call, call_address = _slots()
    _fill(slots[0], q, "q", q.data_ptr())
    _fill(slots[1], k, "k", k.data_ptr())
    _fill(slots[2], v, "v", v.data_ptr())
    _fill(slots[3], out, "out", out.data_ptr())
    if lse is not None:
        _fill(slots[4], lse, "lse", lse.data_ptr())
        call.lse = slots[4].address
    else:
        call.lse = None
    if workspace is not None:
        _fill(slots[5], workspace, "workspace", workspace.data_ptr())
        call.workspace = slots[5].address
    else:
        call.workspace = None
    call.softmax_scale = scale
    call.precision = precision
    call.stream = _raw_stream(q.get_device()) if q.is_cuda else None
    return call_address


def _launch(q, k, v, out, lse, scale: float, precision: int = _BF16_CODE, workspace=None) -> int:
    return _lib.xstage_attention_forward_call(_prepare(q, k, v, out, lse, scale, precision, workspace))


def _copy_unreadable_views(q, k, v):
    """q, k, v with every view the kernel cannot read replaced by a contiguous copy (counted)."""
    global _copies
    lib = _native.lib()
    slot = _slots()[0][0]
    result = []
    for name, t in (("q", q), ("k", k), ("v", v)):
        _fill(slot, t, name, t.data_ptr())
        if lib.xstage_attention_view_check(slot.address, name.encode()) == _native.ERR_LAYOUT:
            t = t.contiguous() if not t.is_contiguous() else t.clone()  # clone: a misaligned contiguous view
            with _copies_lock:
                _copies += 1
        result.append(t)
    return result


def _forward(q, k, v, scale: float, return_lse: bool, precision: int = _BF16_CODE):
    """The real computation (eager path and the custom op's implementation)."""
    out, lse = _outputs(q, return_lse)
    workspace = _workspace(q, k, precision)
    status = _launch(q, k, v, out, lse, scale, precision, workspace)
    if status == _native.ERR_LAYOUT:
        q, k, v = _copy_unreadable_views(q, k, v)
        status = _launch(q, k, v, out, lse, scale, precision, workspace)
    if status != _native.OK:
        _native.raise_for(status, _WHERE)
    return out, lse


def _is_static(t) -> bool:
    return all(type(n) is int for n in t.shape) and all(type(n) is int for n in t.stride())


# Addresses for tensors without storage: aligned, never dereferenced (the views are what is checked). The
# workspace's lies far past the others so that the library's overlap check sees separate buffers.
_META_ADDRESS = 256
_META_WORKSPACE_ADDRESS = 1 << 56


def _check_meta(q, k, v, scale: float, return_lse: bool, precision: int = _BF16_CODE) -> None:
    """Every check of the library on tensors without storage (fake or meta), at trace time. Symbolic
    sizes (dynamic shapes) are checked when the compiled graph runs the real kernel instead."""
    for t in (q, k, v):
        if not _is_static(t):
            return
    if q.is_meta or k.is_meta or v.is_meta:
        _refuse_meta(q, k, v)
    slots, call, call_address = _slots()
    if precision != _BF16_CODE:
        # The workspace the real call allocates (ERR_UNSUPPORTED: a build without the kernel, whose checks
        # do not look at its size; bad q or k raise here with the same message as the call would).
        _fill(slots[0], q, "q", _META_ADDRESS)
        _fill(slots[1], k, "k", _META_ADDRESS)
        n = ctypes.c_uint64()
        status = _lib.xstage_attention_workspace_bytes(slots[0].address, slots[1].address, precision,
                                                       ctypes.byref(n))
        if status not in (_native.OK, _native.ERR_UNSUPPORTED):
            _native.raise_for(status, _WHERE)
        workspace = q.new_empty((max(n.value, 1),), dtype=_U8)
        _fill(slots[5], workspace, "workspace", _META_WORKSPACE_ADDRESS)
        call.workspace = slots[5].address
    else:
        call.workspace = None
    _fill(slots[0], q, "q", _META_ADDRESS)
    _fill(slots[1], k, "k", _META_ADDRESS)
    _fill(slots[2], v, "v", _META_ADDRESS)
    out, lse = _outputs(q, return_lse)
    _fill(slots[3], out, "out", _META_ADDRESS)
    if lse is not None:
        _fill(slots[4], lse, "lse", _META_ADDRESS)
        call.lse = slots[4].address
    else:
        call.lse = None
    call.softmax_scale = scale
    call.precision = precision
    call.stream = None
    status = _lib.xstage_attention_check_call(call_address)
    if status not in (_native.OK, _native.ERR_LAYOUT):  # a view the kernel cannot read is copied at run time
        _native.raise_for(status, _WHERE)


@torch.library.custom_op("xstage::attention", mutates_args=())
def attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, softmax_scale: float,
                 return_lse: bool, precision: str = "bf16") -> tuple[torch.Tensor, torch.Tensor]:
    """softmax_scale 0 selects 1/sqrt(head_dim); lse is an empty tensor unless return_lse; precision "bf16" or
    "fp8" (the fp8 workspace is allocated inside, so the op stays functional)."""
    out, lse = _forward(q, k, v, softmax_scale, return_lse, _precision_arg(precision, _WHERE))
    if lse is None:
        lse = q.new_empty((0,), dtype=_F32)
    return out, lse


@attention_op.register_fake
def _attention_fake(q, k, v, softmax_scale, return_lse, precision="bf16"):
    _check_meta(q, k, v, softmax_scale, return_lse, _precision_arg(precision, _WHERE))
    out = q.new_empty(q.shape)
    if return_lse:
        lse = q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=_F32)
    else:
        lse = q.new_empty((0,), dtype=_F32)
    return out, lse


_is_compiling = torch.compiler.is_compiling
_Tensor = torch.Tensor
_is_grad_enabled = torch.is_grad_enabled
LAYOUTS = ("bshd", "bhsd")


def _bool_arg(value: Any, name: str) -> bool:
    if isinstance(value, (bool, numbers.Integral)) and value in (0, 1):
        return bool(value)
    raise TypeError(f"{_WHERE}: {name} is a {_describe(value)} ({value!r}); accepted: a bool")


def _drop_in_args(softmax_scale: Any, scale: Any, causal: Any, is_causal: Any, dropout_p: Any,
                  layout: Any) -> tuple[Any, bool]:
    """The softmax scale and whether the layout is [B, H, S, D], after the checks of the other libraries' arguments."""
    for name, value in (("causal", causal), ("is_causal", is_causal)):
        if _bool_arg(value, name):
            raise ValueError(f"{_WHERE}: {name}=True; accepted: False (the kernel is non-causal; for causal attention "
                             "use torch.nn.functional.scaled_dot_product_attention(..., is_causal=True))")
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, numbers.Real):
        raise TypeError(f"{_WHERE}: dropout_p is a {_describe(dropout_p)}; accepted: 0.0")
    if float(dropout_p) != 0.0:
        raise ValueError(f"{_WHERE}: dropout_p={dropout_p!r}; accepted: 0.0 (an inference kernel without dropout; "
                         "for dropout use torch.nn.functional.scaled_dot_product_attention(..., dropout_p=...))")
    if scale is not None:
        if softmax_scale is not None and _scale_arg(softmax_scale, _WHERE) != _scale_arg(scale, _WHERE):
            raise ValueError(f"{_WHERE}: softmax_scale={softmax_scale!r} and scale={scale!r} differ; accepted: one of "
                             "them (scale is softmax_scale's name in scaled_dot_product_attention)")
        softmax_scale = scale
    if layout == "bshd":
        return softmax_scale, False
    if layout == "bhsd":
        return softmax_scale, True
    if not isinstance(layout, str):
        raise TypeError(f"{_WHERE}: layout is a {_describe(layout)}; accepted: 'bshd' or 'bhsd'")
    raise ValueError(f"{_WHERE}: layout {layout!r}; accepted: 'bshd' ([batch, seq, heads, head_dim], the default) or "
                     "'bhsd' ([batch, heads, seq, head_dim], scaled_dot_product_attention's)")


def _refuse_grad(q: Any, k: Any, v: Any) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if isinstance(t, _Tensor) and t.requires_grad:
            raise ValueError(f"{_WHERE}: {name}.requires_grad=True with grad mode on; accepted: tensors that need no "
                             "gradient (the kernel is forward only): call it under torch.no_grad() or "
                             "torch.inference_mode(), or pass .detach()ed tensors; for training use "
                             "torch.nn.functional.scaled_dot_product_attention")


def _refuse_meta(q: Any, k: Any, v: Any) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if isinstance(t, _Tensor) and t.is_meta:
            raise ValueError(f"{_WHERE}: {name} is a meta tensor (no data, no device); accepted: CUDA tensors (to trace "
                             "shapes, use fake CUDA tensors: torch.compile, or FakeTensorMode with device='cuda')")


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, softmax_scale: float | None = None,
              return_lse: bool = False, precision: str = "bf16", layout: str = "bshd", scale: float | None = None,
              causal: bool = False, is_causal: bool = False, dropout_p: float = 0.0) -> Any:
    bhsd = False
    if (scale is not None or causal is not False or is_causal is not False or dropout_p != 0.0
            or layout != "bshd" or type(dropout_p) not in (float, int)):
        softmax_scale, bhsd = _drop_in_args(softmax_scale, scale, causal, is_causal, dropout_p, layout)
        if bhsd:
            for name, t in (("q", q), ("k", k), ("v", v)):
                _check_tensor_type(name, t)
                if t.dim() != 4:
                    raise ValueError(f"{_WHERE}: {name}: rank {t.dim()} (shape {list(t.shape)}); accepted: 4 "
                                     "([batch, heads, seq, head_dim] with layout='bhsd')")
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    scale_value = 0.0 if softmax_scale is None else _scale_arg(softmax_scale, _WHERE)
    code = _BF16_CODE if precision == "bf16" else _precision_arg(precision, _WHERE)
    if type(q) is not _Tensor or type(k) is not _Tensor or type(v) is not _Tensor or _is_compiling():
        _check_tensor_type("q", q)
        _check_tensor_type("k", k)
        _check_tensor_type("v", v)
        if (q.requires_grad or k.requires_grad or v.requires_grad) and _is_grad_enabled():
            _refuse_grad(q, k, v)
        # Tensor subclasses and compiled graphs go through the dispatcher; plain eager tensors do not,
        # since the custom-op dispatch costs microseconds per call.
        out, lse = torch.ops.xstage.attention(q, k, v, scale_value, bool(return_lse), precision)
    else:
        if (q.requires_grad or k.requires_grad or v.requires_grad) and _is_grad_enabled():
            _refuse_grad(q, k, v)
        if q.is_meta or k.is_meta or v.is_meta:
            _refuse_meta(q, k, v)
        out, lse = _forward(q, k, v, scale_value, return_lse, code)
    if bhsd:
        out = out.transpose(1, 2)
    return (out, lse) if return_lse else out


attention.__doc__ = ATTENTION_DOC
