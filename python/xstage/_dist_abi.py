"""ctypes declarations of the distributed C ABI (include/xstage/c_api_dist.h) and its torch-free parts: the
shard arithmetic of Ulysses attention and the checks of sizes, which work without a GPU.

The torch layer (xstage.distributed) builds on these; nothing here imports torch.
"""

from __future__ import annotations

import ctypes
from typing import Any, Sequence

from . import _dlpack, _native

ERR_TIMEOUT = 7  # XSTAGE_ERR_TIMEOUT
UNIQUE_ID_BYTES = 128  # XSTAGE_NCCL_UNIQUE_ID_BYTES

_declared = None


class UlyssesCall(ctypes.Structure):
    """xstage_ulysses_call."""
    _fields_ = [
        ("q", ctypes.c_void_p),
        ("k", ctypes.c_void_p),
        ("v", ctypes.c_void_p),
        ("joint_q", ctypes.c_void_p),
        ("joint_k", ctypes.c_void_p),
        ("joint_v", ctypes.c_void_p),
        ("out", ctypes.c_void_p),
        ("joint_out", ctypes.c_void_p),
        ("seq", ctypes.c_int64),
        ("softmax_scale", ctypes.c_float),
        ("stream", ctypes.c_void_p),
    ]


def lib() -> ctypes.CDLL:
    """The C ABI library with the distributed entry points declared."""
    global _declared
    loaded = _native.lib()
    if _declared is loaded:
        return loaded
    c_int, c_int64, c_double, c_float, c_void_p = (ctypes.c_int, ctypes.c_int64, ctypes.c_double, ctypes.c_float,
                                                   ctypes.c_void_p)
    handle_out = ctypes.POINTER(c_void_p)
    sigs = {
        "xstage_dist_available": (c_int, []),
        "xstage_dist_unique_id": (c_int, [ctypes.c_char_p, c_int64]),
        "xstage_team_create": (c_int, [ctypes.c_char_p, c_int64, c_int, c_int, c_int, c_double, handle_out]),
        "xstage_team_destroy": (c_int, [c_void_p]),
        "xstage_ulysses_create": (c_int, [c_void_p, c_int64, c_int64, c_int64, c_int64, c_double, handle_out]),
        "xstage_ulysses_reserve": (c_int, [c_void_p, c_int64, c_int64]),
        "xstage_ulysses_destroy": (c_int, [c_void_p]),
        "xstage_ulysses_forward": (c_int, [c_void_p, c_void_p]),
        "xstage_ulysses_check": (c_int, [c_void_p, c_void_p]),
        "xstage_ulysses_shard_info": (c_int, [c_int64, c_int, c_int, ctypes.POINTER(c_int64)]),
        "xstage_ulysses_split_check": (c_int, [ctypes.POINTER(c_int64), c_int]),
        "xstage_ulysses_heads_check": (c_int, [c_int64, c_int]),
        "xstage_testing_ulysses_emulated_rank": (c_int, [c_void_p, c_void_p, c_void_p, c_int64, c_int, c_int,
                                                         ctypes.POINTER(c_void_p), c_float, c_void_p]),
        "xstage_ulysses_create_with_precision": (c_int, [c_void_p, c_int64, c_int64, c_int64, c_int64, c_double,
                                                         c_int, handle_out]),
        "xstage_ulysses_reserve_with_precision": (c_int, [c_void_p, c_int64, c_int64, c_int]),
        "xstage_ulysses_forward_with_precision": (c_int, [c_void_p, c_void_p, c_int]),
        "xstage_ulysses_check_with_precision": (c_int, [c_void_p, c_void_p, c_int]),
        "xstage_ulysses_last_failure": (ctypes.c_char_p, [c_void_p]),
        "xstage_testing_ulysses_withhold_flags": (c_int, [c_void_p, ctypes.c_uint32]),
        "xstage_testing_ulysses_emulated_rank_with_precision": (c_int, [c_void_p, c_void_p, c_void_p, c_int64, c_int,
                                                                        c_int, ctypes.POINTER(c_void_p), c_float,
                                                                        c_void_p, c_int]),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(loaded, name)
        fn.restype = restype
        fn.argtypes = argtypes
    _declared = loaded
    return loaded


def raise_for(status: int, where: str) -> None:
    """The Python exception of a failed call: TimeoutError for a bounded wait that gave up, else as
    xstage's other entry points (TypeError, ValueError, RuntimeError)."""
    if status == ERR_TIMEOUT:
        raise TimeoutError(f"{where}: {_native.last_error()}")
    _native.raise_for(status, where)


def available() -> bool:
    """True when the library has the distributed layer (built with CUDA and NCCL)."""
    return bool(lib().xstage_dist_available())


def precision_arg(value: Any, where: str) -> str:
    """`value` when it is a precision name xstage.attention takes (its check and messages: TypeError for a
    non-string, else ValueError, naming `precision` and the value)."""
    _dlpack._precision_arg(value, where)
    return value


def precision_code(name: str) -> int:
    """The C ABI's code (XSTAGE_ATTN_PRECISION_*) of a name precision_arg accepted."""
    return _native.PRECISIONS[name]


def _int_arg(value, name: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{where}: {name} is {value!r}; accepted: an int")
    return value


def shard_info(seq: int, world: int, rank: int) -> dict:
    """Rows of the sequence split Ulysses accepts (torch.chunk's: ceil(seq / world) rows per rank, the last rank
    the rest): {'shard_len', 'local_len', 'rotation' (the rank's own-rows-last query rotation), 'tensor_split_len'
    (the rank's rows under torch.tensor_split, diffusers' ulysses_anything)}. ValueError when a rank gets no row."""
    where = "xstage.distributed.shard_info"
    seq, world, rank = (_int_arg(x, n, where) for x, n in ((seq, "seq"), (world, "world"), (rank, "rank")))
    out = (ctypes.c_int64 * 4)()
    status = lib().xstage_ulysses_shard_info(seq, world, rank, out)
    if status != _native.OK:
        raise_for(status, where)
    return {"shard_len": out[0], "local_len": out[1], "rotation": out[2], "tensor_split_len": out[3]}


def check_split(local_lens: Sequence[int]) -> int:
    """The sequence length when ranks holding `local_lens` rows (rank order) form the accepted split; ValueError
    naming the first rank that differs (and saying whether it is torch.tensor_split's split) otherwise."""
    where = "xstage.distributed.check_split"
    lens = [_int_arg(x, f"local_lens[{i}]", where) for i, x in enumerate(local_lens)]
    if not lens:
        raise ValueError(f"{where}: local_lens is empty; accepted: one length per rank")
    arr = (ctypes.c_int64 * len(lens))(*lens)
    status = lib().xstage_ulysses_split_check(arr, len(lens))
    if status != _native.OK:
        raise_for(status, where)
    return sum(lens)


def check_heads(heads: int, world: int) -> None:
    """ValueError unless `heads` split evenly over `world` ranks."""
    where = "xstage.distributed.check_heads"
    status = lib().xstage_ulysses_heads_check(_int_arg(heads, "heads", where), _int_arg(world, "world", where))
    if status != _native.OK:
        raise_for(status, where)
