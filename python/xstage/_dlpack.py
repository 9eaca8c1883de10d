"""Framework-neutral entry points over any object with `__dlpack__` (PyTorch, CuPy, JAX, NumPy).

The caller owns every buffer (out and lse too) and names the stream the work runs on.
"""

from __future__ import annotations

import ctypes
import math
import numbers
from typing import Any

from . import _native

_capsule_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get_pointer.restype = ctypes.c_void_p
_capsule_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _describe(obj) -> str:
    t = type(obj)
    return f"{t.__module__}.{t.__qualname__}" if t.__module__ != "builtins" else t.__qualname__


def borrow(obj: Any, name: str, where: str, stream: int | None) -> tuple[Any, int]:
    """(capsule, DLTensor address) of `obj`: the capsule keeps the tensor alive while it is used.

    The capsule is not consumed, so its destructor returns the tensor to its producer afterwards.
    `stream` follows the DLPack protocol for CUDA producers: the producer makes the data ready on it.
    """
    if not hasattr(obj, "__dlpack__"):
        raise TypeError(f"{where}: {name} is a {_describe(obj)}; accepted: a tensor with __dlpack__ "
                        "(torch.Tensor, cupy.ndarray, jax.Array)")
    device_type = None
    if hasattr(obj, "__dlpack_device__"):
        device_type = int(obj.__dlpack_device__()[0])
    try:
        if device_type == _native.KDL_CUDA:
            capsule = obj.__dlpack__(stream=stream)
        else:
            capsule = obj.__dlpack__()  # producers on other devices accept no stream
    except (BufferError, TypeError, ValueError) as e:
        raise ValueError(f"{where}: {name} ({_describe(obj)}) cannot be exported through DLPack: {e}") from e
    if not _capsule_is_valid(capsule, b"dltensor"):
        raise TypeError(f"{where}: {name}.__dlpack__() returned no DLPack tensor capsule")
    address = _capsule_get_pointer(capsule, b"dltensor")  # DLManagedTensor*, whose first field is the DLTensor
    return capsule, address


def _scale_arg(softmax_scale, where: str) -> float:
    if softmax_scale is None:
        return 0.0
    if isinstance(softmax_scale, bool) or not isinstance(softmax_scale, numbers.Real):
        raise TypeError(f"{where}: softmax_scale is a {_describe(softmax_scale)}; accepted: a real number or None")
    value = float(softmax_scale)
    if not (value > 0.0 and math.isfinite(value)):
        raise ValueError(f"{where}: softmax_scale {softmax_scale!r}; accepted: a positive finite number or None "
                         "(1/sqrt(head_dim))")
    return value


_PRECISIONS_ACCEPTED = ", ".join(repr(name) for name in _native.PRECISIONS)


def _precision_arg(precision, where: str) -> int:
    """The C ABI's XSTAGE_ATTN_PRECISION_* value of a precision name ("bf16", "fp8")."""
    code = _native.PRECISIONS.get(precision) if isinstance(precision, str) else None
    if code is not None:
        return code
    if not isinstance(precision, str):
        raise TypeError(f"{where}: precision is a {_describe(precision)}; accepted: a str "
                        f"({_PRECISIONS_ACCEPTED})")
    raise ValueError(f"{where}: precision {precision!r}; accepted: {_PRECISIONS_ACCEPTED}")


def attention_workspace_bytes(q: Any, k: Any, precision: str = "fp8") -> int:
    """Device bytes of the workspace `attention_dlpack(q, k, v, out, precision=precision, workspace=...)` needs:
    for "fp8" the 8-bit copies of q, k and v^T and their scales (it depends on the shapes of q [B, Sq, H, D]
    and k [B, Skv, H, D] only); for "bf16" the partial results of a split last round of tiles (0 when the
    shapes' schedule on q's device splits nothing). q and k get the same checks as in attention_dlpack."""
    where = "xstage.attention_workspace_bytes"
    code = _precision_arg(precision, where)
    held = []
    addresses = []
    for name, obj in (("q", q), ("k", k)):
        capsule, address = borrow(obj, name, where, -1)  # DLPack's -1: no synchronization (shapes only are read)
        held.append(capsule)
        addresses.append(address)
    out = ctypes.c_uint64()
    status = _native.lib().xstage_attention_workspace_bytes(addresses[0], addresses[1], code, ctypes.byref(out))
    del held
    if status != _native.OK:
        _native.raise_for(status, where)
    return out.value


def attention_dlpack(q: Any, k: Any, v: Any, out: Any, *, lse: Any = None, softmax_scale: float | None = None,
                     stream: int | None = None, precision: str = "bf16", workspace: Any = None) -> None:
    """out[b, i, h, :] = softmax(scale * q[b, i, h] . k[b, :, h]) @ v[b, :, h], written into `out`.

    q [B, Sq, H, D], k and v [B, Skv, H, D], out [B, Sq, H, D]: bfloat16 CUDA tensors of one device,
    D in {64, 128}; lse: None or a contiguous float32 [B, H, Sq] tensor receiving the log-sum-exp.
    stream: the cudaStream_t (an int) to run on; None is the legacy default stream. Strided views the
    kernel cannot read raise ValueError here (the PyTorch layer copies them instead).
    precision: "bf16" (bf16 matrix products) or "fp8" (D 128 only: 8-bit matrix products after a
    quantization pre-pass on the same stream). "fp8" needs `workspace`, the caller's scratch buffer: a
    1-D contiguous uint8 CUDA tensor on q's device of at least attention_workspace_bytes(q, k, "fp8")
    bytes, 256-byte aligned (torch's and CuPy's allocators give that), overlapping no other argument. The
    call overwrites it on `stream`; it must not be used on another stream until that work is done.
    "bf16" takes an optional workspace under the same rules, of attention_workspace_bytes(q, k, "bf16")
    bytes: with it, a last round of tiles that would leave most SMs idle is spread over every SM (faster at
    short sequences; those tiles as accurate as, not bit-identical to, whole ones); without it (None) every tile
    runs on one SM.
    """
    where = "xstage.attention_dlpack"
    scale = _scale_arg(softmax_scale, where)
    code = _precision_arg(precision, where)
    if code == _native.PRECISIONS["fp8"] and workspace is None:
        raise ValueError(f"{where}: precision 'fp8' needs workspace: a 1-D uint8 CUDA tensor of "
                         "xstage.attention_workspace_bytes(q, k, 'fp8') bytes on q's device (None given)")
    # DLPack's stream numbering: 1 is the legacy default stream (0 is not allowed).
    producer_stream = 1 if not stream else int(stream)
    held = []
    addresses = []
    for name, obj in (("q", q), ("k", k), ("v", v), ("out", out)):
        capsule, address = borrow(obj, name, where, producer_stream)
        held.append(capsule)
        addresses.append(address)
    call = _native.AttentionCall()
    call.q, call.k, call.v, call.out = addresses
    if lse is not None:
        capsule, call.lse = borrow(lse, "lse", where, producer_stream)
        held.append(capsule)
    if workspace is not None:
        capsule, call.workspace = borrow(workspace, "workspace", where, producer_stream)
        held.append(capsule)
    call.softmax_scale = scale
    call.stream = int(stream or 0)
    call.precision = code
    status = _native.lib().xstage_attention_forward_call(ctypes.addressof(call))
    del held
    if status != _native.OK:
        _native.raise_for(status, where)
