"""ctypes layer of the fused MoE (include/xstage/c_api_moe.h), torch-free: the entry points' declarations, the
argument checks, the layer handle (_Layer) and the registry the custom op reaches layers through, and the CPU-only
queries (can_implement, predict_schedule, builtin_shapes). Layouts and rules: xstage.moe, the public module, which
re-exports the queries; the torch layer (_torch_moe) and the expert-parallel layer (_dist_moe) build on this.

Imports only _native: nothing here imports torch or a module above it.
"""

from __future__ import annotations

import ctypes
import json
import threading
import weakref
from typing import Any

from . import _native

__all__ = ["ORDERS", "PRECISIONS", "SCHEDULES", "builtin_shapes", "can_implement", "predict_schedule"]

PRECISIONS = {"bf16": 0, "fp8": 1}
ORDERS = {"interleaved": 0, "wave": 1}  # the kernel's tile orders (C ABI codes)
# "auto" (the default): before each run, the order the simulator predicts faster for that many tokens under
# balanced routing (predict_schedule); interleaved unless expert waves are predicted faster by more than 5 %.
SCHEDULES = {"auto": -1, **ORDERS}

_declare_lock = threading.Lock()
_declared = None


def _lib():
    """The C ABI with the MoE entry points declared (once per loaded library)."""
    global _declared
    lib = _native.lib()
    if _declared is lib:
        return lib
    with _declare_lock:
        c_int, c_void_p, c_char_p, u64p = ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint64)
        T = _native.DLTensorPtr
        ints10 = [c_int] * 10
        lib.xstage_moe_can_implement.restype = c_int
        lib.xstage_moe_can_implement.argtypes = ints10 + [u64p]
        lib.xstage_moe_create.restype = c_int
        lib.xstage_moe_create.argtypes = ints10 + [ctypes.POINTER(c_void_p)]
        lib.xstage_moe_destroy.restype = None
        lib.xstage_moe_destroy.argtypes = [c_void_p]
        lib.xstage_moe_set_schedule.restype = c_int
        lib.xstage_moe_set_schedule.argtypes = [c_void_p, c_int, c_int, c_int]
        lib.xstage_moe_set_weights.restype = c_int
        lib.xstage_moe_set_weights.argtypes = [c_void_p, T, T, T, T]
        lib.xstage_moe_check.restype = c_int
        lib.xstage_moe_check.argtypes = [c_void_p, T, T, T, T, c_void_p]
        lib.xstage_moe_run.restype = c_int
        lib.xstage_moe_run.argtypes = [c_void_p, T, T, T, T, c_void_p]
        lib.xstage_moe_info.restype = c_int
        lib.xstage_moe_info.argtypes = [c_void_p, ctypes.POINTER(c_int), ctypes.POINTER(c_int), u64p]
        lib.xstage_moe_last_failure.restype = c_char_p
        lib.xstage_moe_last_failure.argtypes = [c_void_p]
        lib.xstage_moe_quantize_fp8.restype = c_int
        lib.xstage_moe_quantize_fp8.argtypes = [T, T, T, c_void_p]
        lib.xstage_moe_builtin_shapes.restype = c_char_p
        lib.xstage_moe_builtin_shapes.argtypes = []
        lib.xstage_moe_create_on_team.restype = c_int
        lib.xstage_moe_create_on_team.argtypes = [c_void_p] + [c_int] * 9 + [ctypes.c_double,
                                                                             ctypes.POINTER(c_void_p)]
        lib.xstage_moe_predict_schedule.restype = c_int
        lib.xstage_moe_predict_schedule.argtypes = [c_int] * 10 + [ctypes.POINTER(c_int),
                                                                   ctypes.POINTER(ctypes.c_double)]
        lib.xstage_moe_team_info.restype = c_int
        lib.xstage_moe_team_info.argtypes = [c_void_p, ctypes.POINTER(c_int), ctypes.POINTER(c_int)]
        _declared = lib
    return lib


def _choice(value, accepted: dict, name: str, where: str) -> int:
    if not isinstance(value, str):
        raise TypeError(f"{where}: {name} is a {type(value).__name__}; accepted: one of {sorted(accepted)}")
    if value not in accepted:
        raise ValueError(f"{where}: {name} {value!r}; accepted: one of {sorted(accepted)}")
    return accepted[value]


def _int_arg(value, name: str, where: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{where}: {name} is a {type(value).__name__}; accepted: an int")
    if value < minimum:
        raise ValueError(f"{where}: {name} {value}; accepted: an int >= {minimum}")
    return value


def _config_args(where, hidden, h_inter, experts, top_k, max_tokens, precision, schedule, lead_rows, experts_per_wave):
    """The C ABI's integer arguments; Python-level type and choice errors name the argument."""
    dims = [_int_arg(v, n, where, 1) for v, n in ((hidden, "hidden"), (h_inter, "h_inter"), (experts, "experts"),
                                                  (top_k, "top_k"), (max_tokens, "max_tokens"))]
    order = _choice(schedule, SCHEDULES, "schedule", where)
    return dims + [_choice(precision, PRECISIONS, "precision", where), ORDERS["interleaved"] if order < 0 else order,
                   _int_arg(lead_rows, "lead_rows", where, 0), _int_arg(experts_per_wave, "experts_per_wave", where, 0)]


def can_implement(*, hidden: int, h_inter: int, experts: int, top_k: int, max_tokens: int, precision: str = "bf16",
                  schedule: str = "auto", lead_rows: int = 0, experts_per_wave: int = 0,
                  device: int = -1) -> tuple[str, int]:
    """("", workspace bytes) when the kernel can run this layer on `device` (-1: current), else (reason, 0)."""
    where = "xstage.moe.can_implement"
    args = _config_args(where, hidden, h_inter, experts, top_k, max_tokens, precision, schedule, lead_rows,
                        experts_per_wave)
    lib = _lib()
    size = ctypes.c_uint64(0)
    status = lib.xstage_moe_can_implement(int(device), *args, ctypes.byref(size))
    return ("", int(size.value)) if status == _native.OK else (_native.last_error(), 0)


def predict_schedule(*, hidden: int, h_inter: int, experts: int, top_k: int, tokens: int, grid: int, lead_rows: int,
                     experts_per_wave: int, ranks: int = 1, precision: str = "bf16") -> tuple[str, float]:
    """The tile order the schedule "auto" runs, and the predicted speedup (wave makespan / interleaved makespan):
    the event simulator on the embedded platform, `tokens` tokens per rank routed evenly over the experts, with
    the layer's launch (grid, and the lead rows and experts per wave that FusedMoE.info() reports for each order).
    CPU only."""
    where = "xstage.moe.predict_schedule"
    dims = [_int_arg(v, n, where, m) for v, n, m in (
        (hidden, "hidden", 1), (h_inter, "h_inter", 1), (experts, "experts", 1), (top_k, "top_k", 1),
        (tokens, "tokens", 0), (ranks, "ranks", 1))]
    launch = [_int_arg(v, n, where, 1) for v, n in ((grid, "grid"), (lead_rows, "lead_rows"),
                                                    (experts_per_wave, "experts_per_wave"))]
    choice, speedup = ctypes.c_int(-1), ctypes.c_double(0.0)
    status = _lib().xstage_moe_predict_schedule(*dims, _choice(precision, PRECISIONS, "precision", where), *launch,
                                                ctypes.byref(choice), ctypes.byref(speedup))
    if status != _native.OK:
        _native.raise_for(status, where)
    return ("wave" if choice.value == ORDERS["wave"] else "interleaved"), float(speedup.value)


def builtin_shapes() -> list[dict]:
    """The built-in MoE shapes (name, source, hidden, h_inter, experts, top_k), as `xstage moe bench` knows them."""
    return json.loads(_lib().xstage_moe_builtin_shapes().decode())


class _Layer:
    """One C ABI layer handle (no torch needed): created once, destroyed with the object (or by close()).

    team: None for a layer on one GPU; else (team handle, wait_timeout seconds, owner): the layer is one rank of
    that expert-parallel team (xstage_moe_create_on_team, collective), `experts` the team's total. The owner (an
    xstage.distributed.Team) is kept alive by the layer and closes it before the team."""

    def __init__(self, where, device, hidden, h_inter, experts, top_k, max_tokens, precision, schedule, lead_rows=0,
                 experts_per_wave=0, team=None):
        args = _config_args(where, hidden, h_inter, experts, top_k, max_tokens, precision, schedule, lead_rows,
                            experts_per_wave)
        self.hidden, self.h_inter, self.experts, self.top_k, self.max_tokens = args[:5]
        self.precision, self.schedule, self.device = precision, schedule, int(device)
        self.lead_rows, self.experts_per_wave = args[7], args[8]
        self._lib = _lib()
        self._handle = None
        self.team = team[2] if team is not None else None
        handle = ctypes.c_void_p()
        if team is None:
            status = self._lib.xstage_moe_create(self.device, *args, ctypes.byref(handle))
        else:
            status = self._lib.xstage_moe_create_on_team(team[0], *args, float(team[1]), ctypes.byref(handle))
        if status != _native.OK:
            _native.raise_for(status, where)
        self._handle = handle
        self.slots = [_native.TensorSlot() for _ in range(8)]  # x, ids, weights, y, w1, w2, w1_scale, w2_scale
        self.order = "interleaved" if schedule == "auto" else schedule  # the tile order the next run uses
        self._auto = None
        if schedule == "auto":
            self._start_auto(where)

    def _start_auto(self, where) -> None:
        """The launch of each order (grid, lead rows, experts per wave as the kernel resolves them), for the
        predictions of the schedule "auto"; leaves the layer in the interleaved order."""
        self._set_order("wave", where)
        wave = self.info()["schedule_param"]
        self._set_order("interleaved", where)
        inter = self.info()
        self._auto = {"grid": inter["grid"], "lead_rows": inter["schedule_param"], "experts_per_wave": wave,
                      "choices": {}}

    def _set_order(self, order: str, where) -> None:
        status = self._lib.xstage_moe_set_schedule(self.handle(where), ORDERS[order], self.lead_rows,
                                                   self.experts_per_wave)
        if status != _native.OK:
            _native.raise_for(status, where)
        self.order = order

    def resolve(self, tokens: int, where) -> None:
        """Schedule "auto": sets the order predicted for `tokens` tokens (per rank; a team layer predicts once,
        for max_tokens, so that every rank runs the same order). Predictions are cached per token count."""
        if self._auto is None:
            return
        t = self.max_tokens if self.team is not None else int(tokens)
        choices = self._auto["choices"]
        if t not in choices:
            ranks = self.team.world if self.team is not None else 1
            choices[t] = predict_schedule(
                hidden=self.hidden, h_inter=self.h_inter, experts=self.experts, top_k=self.top_k, tokens=t,
                ranks=ranks, precision=self.precision, grid=self._auto["grid"], lead_rows=self._auto["lead_rows"],
                experts_per_wave=self._auto["experts_per_wave"])[0]
        if choices[t] != self.order:
            self._set_order(choices[t], where)

    def close(self) -> None:
        """Frees the layer (after its enqueued runs); later calls fail with a message."""
        if getattr(self, "_handle", None):
            self._lib.xstage_moe_destroy(self._handle)
            self._handle = None

    def __del__(self):
        self.close()

    def handle(self, where):
        if not self._handle:
            raise RuntimeError(f"{where}: the layer was closed (its team was closed)")
        return self._handle

    def set_schedule(self, schedule: str, lead_rows: int = 0, experts_per_wave: int = 0, where="FusedMoE") -> None:
        s = _choice(schedule, SCHEDULES, "schedule", where)
        order = "interleaved" if s < 0 else schedule
        status = self._lib.xstage_moe_set_schedule(self.handle(where), ORDERS[order],
                                                   _int_arg(lead_rows, "lead_rows", where, 0),
                                                   _int_arg(experts_per_wave, "experts_per_wave", where, 0))
        if status != _native.OK:
            _native.raise_for(status, where)
        self.schedule, self.lead_rows, self.experts_per_wave, self.order = schedule, lead_rows, experts_per_wave, order
        self._auto = None
        if schedule == "auto":
            self._start_auto(where)

    def info(self) -> dict:
        grid, param, runs = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_uint64(0)
        status = self._lib.xstage_moe_info(self.handle("FusedMoE.info"), ctypes.byref(grid), ctypes.byref(param), ctypes.byref(runs))
        if status != _native.OK:
            _native.raise_for(status, "FusedMoE.info")
        return {"grid": grid.value, "schedule_param": param.value, "runs": int(runs.value), "schedule": self.schedule,
                "order": self.order}

    def last_failure(self) -> str:
        if not self._handle:
            return ""
        return self._lib.xstage_moe_last_failure(self._handle).decode("utf-8", "replace")

    def set_weights(self, w1, w2, w1_scale, w2_scale, where) -> None:
        """DLTensor addresses (w1_scale, w2_scale: None for a bf16 layer)."""
        status = self._lib.xstage_moe_set_weights(self.handle(where), w1, w2, w1_scale, w2_scale)
        if status != _native.OK:
            _native.raise_for(status, where)

    def run(self, x, ids, weights, y, stream: int, where) -> None:
        """DLTensor addresses; stream: a cudaStream_t as an int (0: the legacy default stream)."""
        status = self._lib.xstage_moe_run(self.handle(where), x, ids, weights, y, stream or None)
        if status != _native.OK:
            message = _native.last_error()
            failure = self.last_failure()
            if failure:
                raise RuntimeError(f"{where}: {message} (in-kernel wait: {failure})")
            _native.raise_for(status, where)


# Layers reachable from the custom op by an integer id (the op's schema holds no Python object); weak,
# so a module's workspace is freed with the module.
_layers: weakref.WeakValueDictionary[int, _Layer] = weakref.WeakValueDictionary()
_layers_lock = threading.Lock()
_next_id = [1]


def _register(layer: _Layer) -> int:
    with _layers_lock:
        i = _next_id[0]
        _next_id[0] += 1
        _layers[i] = layer
        return i

