"""xstage's team of GPUs for a torch.distributed ProcessGroup (Team, public as xstage.distributed.Team): the NCCL
unique id exchanged through the group's store with a bounded wait, the team's NCCL communicator and windows through
the distributed C ABI (_dist_abi), and the bounded synchronization that names a rank whose in-kernel wait expired.
The Ulysses layer (_dist_ulysses) and the expert-parallel MoE (_dist_moe) build on it.
"""

from __future__ import annotations

import ctypes
import datetime
import math
import threading
import time
import weakref
from typing import Any

import torch  # before the native library: it loads the libnccl.so.2 xstage then uses
import torch.distributed as dist

from . import _dist_abi, _native
from ._dlpack import _describe

__all__ = ["DEFAULT_TIMEOUT_S", "DEFAULT_WAIT_TIMEOUT_S", "Team"]

DEFAULT_TIMEOUT_S = 60.0  # team creation: id exchange and NCCL communicator initialization
DEFAULT_WAIT_TIMEOUT_S = 10.0  # the owner's device-side wait for the other ranks' stores

_lock = threading.Lock()
_teams: dict = {}          # id(group) -> Team (the group is kept alive by the Team)
_team_counts: dict = {}    # ranks of a group -> teams created for it in this process (store key suffix)


def _where(name: str) -> str:
    return f"xstage.distributed.{name}"


def _timeout_arg(value, name: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{where}: {name} is a {_describe(value)}; accepted: a number of seconds")
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{where}: {name} {value!r}; accepted: a positive finite number of seconds")
    return float(value)


def _resolve_group(group, where: str):
    if not dist.is_available() or not dist.is_initialized():
        raise ValueError(f"{where}: torch.distributed is not initialized; call "
                         "torch.distributed.init_process_group('nccl') first (e.g. under torchrun)")
    if group is None:
        group = dist.group.WORLD
    if not isinstance(group, dist.ProcessGroup):
        raise TypeError(f"{where}: group is a {_describe(group)}; accepted: a torch.distributed.ProcessGroup or None")
    backend = str(dist.get_backend(group))
    if "nccl" not in backend.lower():
        raise ValueError(f"{where}: group has backend {backend!r}; accepted: a group with the NCCL backend "
                         "(init_process_group('nccl') or new_group(backend='nccl'))")
    return group


def _default_store():
    try:
        from torch.distributed.distributed_c10d import _get_default_store
        return _get_default_store()
    except Exception:  # noqa: BLE001 - no default store (e.g. a custom init): fall back to a broadcast
        return None


def _new_unique_id() -> bytes:
    lib = _dist_abi.lib()
    buf = ctypes.create_string_buffer(_dist_abi.UNIQUE_ID_BYTES)
    status = lib.xstage_dist_unique_id(buf, _dist_abi.UNIQUE_ID_BYTES)
    if status != _native.OK:
        _dist_abi.raise_for(status, _where("Team"))
    return buf.raw


def _store_exchange(store, prefix: str, rank: int, world: int, timeout_s: float, make_id=_new_unique_id) -> bytes:
    """Rank 0's id (make_id()) on every rank through `store`, keys under `prefix`: every rank marks its arrival
    and waits at most timeout_s for all arrivals and the id; a timeout names the ranks that did not arrive."""
    if rank == 0:
        store.set(f"{prefix}/id", make_id())
    store.set(f"{prefix}/arrived/{rank}", b"1")
    keys = [f"{prefix}/arrived/{r}" for r in range(world)]
    try:
        store.wait(keys + [f"{prefix}/id"], datetime.timedelta(seconds=timeout_s))
    except Exception as e:  # noqa: BLE001 - torch raises DistStoreError or RuntimeError on a timeout
        missing = [r for r in range(world) if not store.check([keys[r]])]
        raise TimeoutError(f"{_where('Team')}: rank {rank} of {world}: step 'unique id exchange' (torch store): "
                           f"ranks {missing or '(none missing; rank 0 published no id)'} of the group did not "
                           f"arrive within {timeout_s:g} s ({type(e).__name__})") from e
    return bytes(store.get(f"{prefix}/id"))


def _exchange_unique_id(group, rank: int, world: int, timeout_s: float) -> bytes:
    """Rank 0's NCCL unique id on every rank, through the group's store with a bounded wait that names the ranks
    that did not arrive; without a store, a broadcast over the group (torch's own timeout applies)."""
    store = _default_store()
    if store is None:
        t = torch.zeros(_dist_abi.UNIQUE_ID_BYTES, dtype=torch.uint8, device="cuda")
        if rank == 0:
            t.copy_(torch.frombuffer(bytearray(_new_unique_id()), dtype=torch.uint8))
        dist.broadcast(t, group_src=0, group=group)
        return bytes(t.cpu().tolist())
    ranks = tuple(dist.get_process_group_ranks(group))
    with _lock:
        n = _team_counts.get(ranks, 0)
        _team_counts[ranks] = n + 1
    return _store_exchange(store, f"xstage/team/{'-'.join(map(str, ranks))}/{n}", rank, world, timeout_s)


class Team:
    """xstage's team of GPUs for a torch.distributed ProcessGroup (NCCL backend): one per group, cached.

    Team(group) is collective: every rank of the group calls it (on its current CUDA device, set with
    torch.cuda.set_device) within `timeout` seconds. rank, world and device are the group's."""

    def __new__(cls, group: Any = None, *, timeout: float = DEFAULT_TIMEOUT_S) -> "Team":
        where = _where("Team")
        group = _resolve_group(group, where)
        timeout = _timeout_arg(timeout, "timeout", where)
        with _lock:
            team = _teams.get(id(group))
        if team is not None and team.group is group:
            return team
        team = super().__new__(cls)
        team._init(group, timeout)
        with _lock:
            _teams[id(group)] = team
        return team

    def _init(self, group, timeout: float) -> None:
        where = _where("Team")
        if not torch.cuda.is_available():
            raise ValueError(f"{where}: no CUDA device (torch.cuda.is_available() is False)")
        lib = _dist_abi.lib()
        if not lib.xstage_dist_available():
            raise RuntimeError(f"{where}: this xstage build has no distributed layer (built without CUDA/NCCL)")
        self.group = group
        self.rank = dist.get_rank(group)
        self.world = dist.get_world_size(group)
        self.device = torch.cuda.current_device()
        self._ulysses: dict = {}
        self._moe_layers: weakref.WeakSet[Any] = weakref.WeakSet()  # the fused MoE layers on this team (xstage.distributed.FusedMoE)
        self._handle = None
        uid = _exchange_unique_id(group, self.rank, self.world, timeout)
        handle = ctypes.c_void_p()
        status = lib.xstage_team_create(uid, len(uid), self.rank, self.world, self.device, timeout,
                                        ctypes.byref(handle))
        if status != _native.OK:
            _dist_abi.raise_for(status, where)
        self._handle = handle

    @property
    def handle(self) -> int:
        if self._handle is None:
            raise RuntimeError(f"{_where('Team')}: the team of rank {self.rank} was closed")
        return int(self._handle.value or 0)

    def ulysses(self, heads: int, head_dim: int, seq_shard: int, joint: int, wait_timeout: float,
                precision: str = "bf16") -> Any:
        """The native Ulysses object of this team for (heads, head_dim), grown to hold seq_shard rows per rank and
        `joint` joint tokens and to run `precision` (an fp8 object also runs bf16). Collective when it creates or
        grows (every rank passes the same sizes and precision, in the same order)."""
        lib = _dist_abi.lib()
        where = _where("ulysses_attention")
        key = (heads, head_dim, wait_timeout)
        entry = self._ulysses.get(key)
        fp8 = precision == "fp8"
        if entry is None:
            handle = ctypes.c_void_p()
            status = lib.xstage_ulysses_create_with_precision(self.handle, seq_shard, heads, head_dim, joint,
                                                              wait_timeout, _dist_abi.precision_code(precision),
                                                              ctypes.byref(handle))
            if status != _native.OK:
                _dist_abi.raise_for(status, where)
            entry = self._ulysses[key] = [handle, seq_shard, joint, fp8]
        elif seq_shard > entry[1] or joint > entry[2] or (fp8 and not entry[3]):
            entry[1], entry[2], entry[3] = max(seq_shard, entry[1]), max(joint, entry[2]), entry[3] or fp8
            status = lib.xstage_ulysses_reserve_with_precision(entry[0], entry[1], entry[2],
                                                               _dist_abi.precision_code("fp8" if entry[3] else "bf16"))
            if status != _native.OK:
                _dist_abi.raise_for(status, where)
        return entry[0].value

    def _adopt(self, moe_layer) -> None:
        """Registers a fused MoE layer built on this team: its failure record is read by synchronize(), and close()
        frees it before the team."""
        self._moe_layers.add(moe_layer)

    def failures(self) -> list:
        """The in-kernel waits of this team's Ulysses objects and MoE layers that expired, one line each (host
        memory: readable after the CUDA context is lost)."""
        lib = _dist_abi.lib()
        found = [(lib.xstage_ulysses_last_failure(handle) or b"").decode("utf-8", "replace")
                 for handle, *_ in list(self._ulysses.values())]
        found += [layer.last_failure() for layer in list(self._moe_layers)]
        return [f for f in found if f]

    def _raise_failures(self, where: str, cause=None) -> None:
        found = self.failures()
        if found:
            raise TimeoutError(f"{where}: rank {self.rank} of {self.world}: an in-kernel wait expired: "
                               f"{'; '.join(found)} (a peer rank did not arrive; the kernel trapped, so the CUDA "
                               "context is lost and the process must restart)") from cause

    def synchronize(self, timeout: float | None = None) -> None:
        """Waits for the work enqueued so far on the current CUDA stream, polling at most `timeout` seconds (default:
        15 s, the longest in-kernel wait a layer may have, 10 s, plus 5 s), so a rank that does not arrive never hangs
        this one: raises TimeoutError naming this rank and the step when an in-kernel wait of the team's Ulysses
        attention or MoE layers expired (its kernel trapped), or when the work did not finish in time (e.g. a
        peer that never joins the pre-attention All-to-All's NCCL exchange); RuntimeError for other device
        errors."""
        where = _where("Team.synchronize")
        limit = DEFAULT_WAIT_TIMEOUT_S + 5.0 if timeout is None else _timeout_arg(timeout, "timeout", where)
        self._raise_failures(where)
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(self.device))
        deadline = time.monotonic() + limit
        pause = 1e-4
        while True:
            try:
                if event.query():
                    return
            except Exception as e:  # noqa: BLE001 - a trapped kernel: torch raises on the sticky error
                self._raise_failures(where, e)
                raise RuntimeError(f"{where}: rank {self.rank} of {self.world}: the device reported an error "
                                   f"({type(e).__name__}: {e})") from e
            if time.monotonic() > deadline:
                self._raise_failures(where)
                raise TimeoutError(f"{where}: rank {self.rank} of {self.world}: the enqueued work did not finish "
                                   f"within {limit:g} s (no in-kernel wait has expired yet)")
            time.sleep(pause)
            pause = min(pause * 2, 0.01)

    def close(self) -> None:
        """Frees the team's MoE layers, Ulysses objects, NCCL communicator and windows (after every rank's last
        use; collective in NCCL's sense: all ranks should close)."""
        lib = _dist_abi.lib()
        torch.cuda.synchronize(self.device)
        for layer in list(self._moe_layers):
            layer.close()
        self._moe_layers.clear()
        for handle, *_ in self._ulysses.values():
            lib.xstage_ulysses_destroy(handle)
        self._ulysses.clear()
        if self._handle is not None:
            lib.xstage_team_destroy(self._handle)
            self._handle = None
        with _lock:
            if _teams.get(id(self.group)) is self:
                del _teams[id(self.group)]

    def __repr__(self) -> str:
        return f"xstage.distributed.Team(rank={self.rank}, world={self.world}, device=cuda:{self.device})"
