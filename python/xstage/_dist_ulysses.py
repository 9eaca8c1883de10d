"""Ulysses attention over a torch.distributed group (public as xstage.distributed.ulysses_attention and
UlyssesAttention): the checks of the inputs and of the sequence split, and the call of the fused kernel (the
post-attention All-to-All in the attention epilogue) through the distributed C ABI on the group's Team.
"""

from __future__ import annotations

import ctypes
from typing import Any

import torch  # before the native library: it loads the libnccl.so.2 xstage then uses
import torch.distributed as dist

from . import _dist_abi, _native
from ._dist_team import DEFAULT_TIMEOUT_S, DEFAULT_WAIT_TIMEOUT_S, Team, _resolve_group, _timeout_arg, _where
from ._dlpack import _describe, _scale_arg, borrow

__all__ = ["HEAD_DIM", "JOINT_STRATEGIES", "UlyssesAttention", "ulysses_attention"]

JOINT_STRATEGIES = ("rear", "none")
HEAD_DIM = 128


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
