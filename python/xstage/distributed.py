"""xstage on torch.distributed: teams built from a ProcessGroup, Ulysses attention with the fused All-to-All and the
expert-parallel fused MoE (FusedMoE).

    # torchrun --nproc_per_node N script.py
    import torch, torch.distributed as dist
    import xstage.distributed as xd
    dist.init_process_group("nccl"); torch.cuda.set_device(local_rank)
    out = xd.ulysses_attention(q, k, v, group)        # q, k, v, out: [B, S_local, H, D] bf16, sequence-sharded
    out, joint_out = xd.ulysses_attention(q, k, v, group, joint_q=tq, joint_k=tk, joint_v=tv)   # xDiT's "rear"
    moe = xd.FusedMoE(w1_local, w2_local, top_k=8, group=group)   # this rank's experts; y = moe(x, ids, weights)

One team per group (cached): rank 0 of the group creates an NCCL unique id, the ranks exchange it through the
group's store (bounded: a rank that does not arrive is named), and each builds its NCCL communicator on its current
CUDA device with the libnccl torch loaded (bounded too). Multicast stays off. Every wait has a timeout argument;
a host-side timeout raises TimeoutError naming the rank and the step. The device-side waits for other ranks (the
Ulysses owner's wait for their stores, the fused MoE kernel's counts, rows and flags) are bounded by wait_timeout;
when one passes, the kernel records the rank and the wait in host memory and traps (the CUDA context is lost and
the process must restart); Team.synchronize() and every later forward then raise TimeoutError naming the rank, the
wait and the step.
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

__all__ = ["Team", "ulysses_attention", "UlyssesAttention", "FusedMoE", "shard_info", "check_split",
           "JOINT_STRATEGIES"]

shard_info = _dist_abi.shard_info
check_split = _dist_abi.check_split

JOINT_STRATEGIES = ("rear", "none")
DEFAULT_TIMEOUT_S = 60.0  # team creation: id exchange and NCCL communicator initialization
DEFAULT_WAIT_TIMEOUT_S = 10.0  # the owner's device-side wait for the other ranks' stores
HEAD_DIM = 128

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


def _check_tensor(name: str, t, where: str) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{where}: {name} is a {_describe(t)}; accepted: a torch.Tensor (bfloat16, CUDA)")
    if t.dtype != torch.bfloat16:
        raise TypeError(f"{where}: {name}: dtype {str(t.dtype).replace('torch.', '')}; accepted: bfloat16")
    if t.dim() != 4:
        raise ValueError(f"{where}: {name}: shape {list(t.shape)}; accepted: 4 dimensions [batch, seq, heads, head_dim]")


def _check_inputs(q, k, v, joint_q, joint_k, joint_v, joint_strategy, world: int, device: int, where: str):
    for name, t in (("q", q), ("k", k), ("v", v)):
        _check_tensor(name, t, where)
    for name, t in (("k", k), ("v", v)):
        if t.shape != q.shape:
            raise ValueError(f"{where}: {name}: shape {list(t.shape)}; accepted: q's shape {list(q.shape)} "
                             "(self-attention over the sharded sequence)")
    B, _, H, D = q.shape
    if H % world != 0:
        raise ValueError(f"{where}: heads {H} (q shape {list(q.shape)}) not divisible by the group's world size "
                         f"{world}")
    if D != HEAD_DIM:
        raise ValueError(f"{where}: head_dim {D} (q shape {list(q.shape)}); accepted: {HEAD_DIM}")
    if not isinstance(joint_strategy, str) or joint_strategy not in JOINT_STRATEGIES:
        raise ValueError(f"{where}: joint_strategy {joint_strategy!r}; accepted: {', '.join(map(repr, JOINT_STRATEGIES))}"
                         " (xDiT's 'front' is not supported)")
    joints = (("joint_q", joint_q), ("joint_k", joint_k), ("joint_v", joint_v))
    given = [name for name, t in joints if t is not None]
    if joint_strategy == "none" and given:
        raise ValueError(f"{where}: joint_strategy 'none' with {', '.join(given)} given; accepted: 'rear' with joint "
                         "tensors, or no joint tensors")
    if (joint_k is None) != (joint_v is None):
        raise ValueError(f"{where}: joint_k and joint_v: give both or neither (got {', '.join(given)})")
    if joint_q is not None and joint_k is None:
        raise ValueError(f"{where}: joint_q needs joint_k and joint_v (joint queries attend to the joint keys too)")
    T = None
    for name, t in joints:
        if t is None:
            continue
        _check_tensor(name, t, where)
        if T is None:
            T = t.shape[1]
        if t.shape[0] != B or t.shape[1] != T or t.shape[2] != H or t.shape[3] != D:
            raise ValueError(f"{where}: {name}: shape {list(t.shape)}; accepted: [{B}, {T}, {H}, {D}] ([batch, joint "
                             "tokens, heads, head_dim], replicated on every rank, batch/heads/head_dim of q)")
        if T < 1:
            raise ValueError(f"{where}: {name}: shape {list(t.shape)}; accepted: at least one joint token")
    # Devices last, so that every other check also runs on CPU tensors (tests without a GPU).
    for name, t in (("q", q), ("k", k), ("v", v)) + joints:
        if t is None:
            continue
        if t.device.type != "cuda":
            raise ValueError(f"{where}: {name}: device {t.device}; accepted: a CUDA device")
        if t.get_device() != device:
            raise ValueError(f"{where}: {name}: device {t.device}; the current device (the team's) is cuda:{device}")
    return T or 0


def _sequence_length(group, world: int, rank: int, local_len: int, seq_len, where: str) -> int:
    """The whole sequence's rows, checked against the accepted split (torch.chunk's)."""
    if seq_len is None:
        if world == 1:
            return local_len
        sizes = torch.empty(world, dtype=torch.int64, device="cuda")
        dist.all_gather_into_tensor(sizes, torch.tensor([local_len], dtype=torch.int64, device="cuda"), group=group)
        lens = sizes.tolist()
        try:
            return _dist_abi.check_split(lens)
        except ValueError as e:
            raise ValueError(f"{where}: the group's shards {lens}: {e}") from None
    if isinstance(seq_len, bool) or not isinstance(seq_len, int):
        raise TypeError(f"{where}: seq_len is a {_describe(seq_len)}; accepted: an int or None")
    try:
        info = _dist_abi.shard_info(seq_len, world, rank)
    except ValueError as e:
        raise ValueError(f"{where}: seq_len {seq_len}: {e}") from None
    if info["local_len"] != local_len:
        raise ValueError(f"{where}: q holds {local_len} rows on rank {rank}, but seq_len {seq_len} over {world} ranks "
                         f"gives this rank {info['local_len']} (torch.chunk's split: ceil(seq_len / world) rows per "
                         "rank, the last rank the rest)")
    return seq_len


def _borrow_all(tensors, stream: int, where: str):
    from ._dlpack import borrow
    held: list[Any] = []
    addresses: list[int | None] = []
    for name, t in tensors:
        if t is None:
            addresses.append(None)
            continue
        capsule, address = borrow(t, name, where, stream or 1)
        held.append(capsule)
        addresses.append(address)
    return held, addresses


def ulysses_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, group: Any = None, *,
                      joint_q: torch.Tensor | None = None, joint_k: torch.Tensor | None = None,
                      joint_v: torch.Tensor | None = None, joint_strategy: str = "rear",
                      softmax_scale: float | None = None, seq_len: int | None = None,
                      timeout: float = DEFAULT_TIMEOUT_S, wait_timeout: float = DEFAULT_WAIT_TIMEOUT_S,
                      precision: str = "bf16") -> Any:
    """Ulysses attention over `group` (NCCL) with the post-attention All-to-All fused into the attention epilogue.

    q, k, v: [B, S_local, H, D] bfloat16 CUDA tensors on the current device, this rank's rows of the sequence
    (torch.chunk's split: ceil(S / world) rows per rank, the last rank the rest); H divisible by the world size,
    D = 128. Returns out [B, S_local, H, D]: this rank's rows, all heads, of non-causal softmax attention over the
    whole sequence.

    joint_k, joint_v [B, T, H, D] (replicated on every rank, xDiT's joint_strategy="rear"): appended after the
    sequence's keys and values. joint_q [B, T, H, D] (with joint_k, joint_v): the joint queries attend to the same
    keys; then (out, joint_out [B, T, H, D]) is returned, joint_out the same on every rank.

    seq_len: the whole sequence's rows; None gathers the shard lengths over the group (one small all-gather and a
    host synchronization per call). timeout: team creation (first call on a group). wait_timeout: the device-side
    wait for the other ranks' stores. Runs on the current CUDA stream; forward only (no autograd).

    precision: the attention's operand precision, "bf16" or "fp8" (8-bit operands after a quantization pre-pass on
    the same stream, xstage.attention's FP8 path; inputs and outputs stay bfloat16, and so do the All-to-Alls). The
    pre-pass scales each query row on its own and quantizes K and V in sequence order, as on one GPU, so the result
    equals xstage.attention(q, k, v, precision="fp8") on the whole sequence bit for bit, whatever the split.
    """
    where = _where("ulysses_attention")
    precision = _dist_abi.precision_arg(precision, where)
    group = _resolve_group(group, where)
    timeout = _timeout_arg(timeout, "timeout", where)
    wait_timeout = _timeout_arg(wait_timeout, "wait_timeout", where)
    from ._dlpack import _scale_arg
    scale = _scale_arg(softmax_scale, where)
    world = dist.get_world_size(group)
    device = torch.cuda.current_device() if torch.cuda.is_available() else -1
    T = _check_inputs(q, k, v, joint_q, joint_k, joint_v, joint_strategy, world, device, where)
    team = Team(group, timeout=timeout)
    if team.device != device:
        raise ValueError(f"{where}: the current CUDA device is cuda:{device}, the group's team runs on "
                         f"cuda:{team.device}")
    team._raise_failures(where)  # an earlier wait trapped: the context is lost, nothing may be enqueued
    B, S_local, H, D = q.shape
    seq = _sequence_length(group, world, team.rank, S_local, seq_len, where)
    shard = _dist_abi.shard_info(seq, world, team.rank)["shard_len"]
    handle = team.ulysses(H, D, shard, T, wait_timeout, precision)
    out = torch.empty(q.shape, dtype=torch.bfloat16, device=q.device)
    joint_out = torch.empty(joint_q.shape, dtype=torch.bfloat16, device=q.device) if joint_q is not None else None
    stream = torch.cuda.current_stream(device).cuda_stream
    lib = _dist_abi.lib()
    inputs = [q, k, v, joint_q, joint_k, joint_v]
    for attempt in range(2):
        held, addr = _borrow_all(list(zip(("q", "k", "v", "joint_q", "joint_k", "joint_v", "out", "joint_out"),
                                          inputs + [out, joint_out])), stream, where)
        call = _dist_abi.UlyssesCall(addr[0], addr[1], addr[2], addr[3], addr[4], addr[5], addr[6], addr[7], seq, scale,
                                     stream)
        status = lib.xstage_ulysses_forward_with_precision(handle, ctypes.byref(call),
                                                           _dist_abi.precision_code(precision))
        del held
        if status == _native.ERR_LAYOUT and attempt == 0:
            inputs = [None if t is None else t.contiguous() if not t.is_contiguous() else t.clone() for t in inputs]
            continue
        break
    if status != _native.OK:
        _dist_abi.raise_for(status, where)
    return out if joint_q is None else (out, joint_out)


class UlyssesAttention(torch.nn.Module):
    """torch.nn.Module form of ulysses_attention over a fixed group: forward(q, k, v, joint_q=None, joint_k=None,
    joint_v=None) with the strategy, scale, timeouts and precision given here."""

    def __init__(self, group: Any = None, *, joint_strategy: str = "rear", softmax_scale: float | None = None,
                 timeout: float = DEFAULT_TIMEOUT_S, wait_timeout: float = DEFAULT_WAIT_TIMEOUT_S,
                 precision: str = "bf16") -> None:
        super().__init__()
        where = _where("UlyssesAttention")
        self.precision = _dist_abi.precision_arg(precision, where)
        if not isinstance(joint_strategy, str) or joint_strategy not in JOINT_STRATEGIES:
            raise ValueError(f"{where}: joint_strategy {joint_strategy!r}; accepted: "
                             f"{', '.join(map(repr, JOINT_STRATEGIES))}")
        from ._dlpack import _scale_arg
        _scale_arg(softmax_scale, where)
        self.group = group
        self.joint_strategy = joint_strategy
        self.softmax_scale = softmax_scale
        self.timeout = _timeout_arg(timeout, "timeout", where)
        self.wait_timeout = _timeout_arg(wait_timeout, "wait_timeout", where)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, joint_q: torch.Tensor | None = None,
                joint_k: torch.Tensor | None = None, joint_v: torch.Tensor | None = None,
                seq_len: int | None = None) -> Any:
        return ulysses_attention(q, k, v, self.group, joint_q=joint_q, joint_k=joint_k, joint_v=joint_v,
                                 joint_strategy=self.joint_strategy, softmax_scale=self.softmax_scale, seq_len=seq_len,
                                 timeout=self.timeout, wait_timeout=self.wait_timeout, precision=self.precision)

    def extra_repr(self) -> str:
        return (f"joint_strategy={self.joint_strategy!r}, softmax_scale={self.softmax_scale}, "
                f"precision={self.precision!r}")


def _testing_emulated_rank(q, k, v, heads: int, rank: int, world: int, owner_out, softmax_scale=None,
                           precision: str = "bf16") -> None:
    """TESTING ONLY: one rank of a `world`-rank team emulated on one GPU (xstage_testing_ulysses_emulated_rank):
    q [1, seq, heads / world, D] in the rank's rotated row order, k, v [1, seq_k, heads / world, D], owner_out a
    list of `world` contiguous [local_len(p), heads, D] tensors receiving the fused kernel's stores, at `precision`.
    Synchronizes."""
    where = _where("_testing_emulated_rank")
    precision = _dist_abi.precision_arg(precision, where)
    from ._dlpack import _scale_arg
    scale = _scale_arg(softmax_scale, where)
    stream = torch.cuda.current_stream(q.device).cuda_stream
    held, addr = _borrow_all([("q", q), ("k", k), ("v", v)] + [(f"owner_out[{p}]", o) for p, o in enumerate(owner_out)],
                             stream, where)
    outs = (ctypes.c_void_p * world)(*addr[3:])
    status = _dist_abi.lib().xstage_testing_ulysses_emulated_rank_with_precision(addr[0], addr[1], addr[2], heads,
                                                                                 rank, world, outs, scale, stream,
                                                                                 _dist_abi.precision_code(precision))
    del held
    if status != _native.OK:
        _dist_abi.raise_for(status, where)


from ._dist_moe import FusedMoE  # noqa: E402 - after Team, which it builds on
