"""xstage's distributed layer without a GPU: the shard arithmetic and the C ABI's bad-input errors (no torch
needed), then, where torch is installed, the Python layer's input checks, the group checks and diffusers'
context-parallel routing (with a CPU stand-in for the Ulysses kernel)."""

from __future__ import annotations

import ctypes
import socket
import types

import pytest

from xstage import _dist_abi, _native

lib = _dist_abi.lib


def test_shard_info_is_torch_chunks_split():
    # 10 rows over 4 ranks: torch.chunk gives 3, 3, 3, 1.
    assert [_dist_abi.shard_info(10, 4, r)["local_len"] for r in range(4)] == [3, 3, 3, 1]
    info = _dist_abi.shard_info(10, 4, 1)
    assert info == {"shard_len": 3, "local_len": 3, "rotation": 6, "tensor_split_len": 3}
    assert _dist_abi.shard_info(10, 4, 3)["rotation"] == 0   # the last rank's own rows already end the order
    assert _dist_abi.shard_info(7, 1, 0) == {"shard_len": 7, "local_len": 7, "rotation": 0, "tensor_split_len": 7}


@pytest.mark.parametrize("seq,world,rank,needle", [
    (5, 4, 0, "rank 3 of 4 no rows"),       # ceil(5/4) = 2 leaves the last rank nothing
    (3, 4, 0, "seq 3"),
    (10, 4, 4, "rank 4 (0..3)"),
    (10, 0, 0, "world 0"),
])
def test_shard_info_refuses_splits_that_leave_a_rank_empty(seq, world, rank, needle):
    with pytest.raises(ValueError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        _dist_abi.shard_info(seq, world, rank)


def test_check_split_names_tensor_split():
    assert _dist_abi.check_split([3, 3, 3, 1]) == 10
    assert _dist_abi.check_split([3, 3, 3, 2]) == 11      # tensor_split agrees here (11 % 4 == 3)
    with pytest.raises(ValueError, match=r"rank 2 holds 2 of 10 rows.*tensor_split"):
        _dist_abi.check_split([3, 3, 2, 2])               # diffusers' ulysses_anything split of 10 rows
    with pytest.raises(ValueError, match="local_lens is empty"):
        _dist_abi.check_split([])
    with pytest.raises(TypeError, match=r"local_lens\[1\]"):
        _dist_abi.check_split([3, "3"])


def test_check_heads():
    _dist_abi.check_heads(24, 4)
    with pytest.raises(ValueError, match="heads 24 not divisible by the world size 5"):
        _dist_abi.check_heads(24, 5)


def _status(status, where="t"):
    if status != _native.OK:
        _dist_abi.raise_for(status, where)


def test_c_abi_team_create_bad_input():
    out = ctypes.c_void_p()
    good = b"\0" * _dist_abi.UNIQUE_ID_BYTES
    cases = [
        ((b"\0" * 5, 5, 0, 1, 0, 10.0), "id: size 5"),
        ((good, len(good), 3, 2, 0, 10.0), r"rank 3 \(0..1\)"),
        ((good, len(good), 0, 0, 0, 10.0), "world 0"),
        ((good, len(good), 0, 1, 0, -1.0), "timeout_s"),
        ((good, len(good), 0, 1, 0, float("nan")), "timeout_s"),
    ]
    for args, needle in cases:
        with pytest.raises(ValueError, match=needle):
            _status(lib().xstage_team_create(*args, ctypes.byref(out)))
        assert out.value is None   # nothing created on error


def test_c_abi_ulysses_bad_input():
    out = ctypes.c_void_p()
    with pytest.raises(ValueError, match="team: null"):
        _status(lib().xstage_ulysses_create(None, 1024, 24, 128, 0, 10.0, ctypes.byref(out)))
    with pytest.raises(ValueError, match="unique id buffer: size 7"):
        _status(lib().xstage_dist_unique_id(ctypes.create_string_buffer(7), 7))
    call = _dist_abi.UlyssesCall()
    expected = ValueError if _dist_abi.available() else RuntimeError
    with pytest.raises(expected):
        _status(lib().xstage_ulysses_forward(None, ctypes.byref(call)))
    with pytest.raises(ValueError, match="null handle"):   # a null argument is bad input first, in either build
        _status(lib().xstage_ulysses_reserve(None, 10, 0))
    assert lib().xstage_ulysses_destroy(None) == _native.OK and lib().xstage_team_destroy(None) == _native.OK
    assert lib().xstage_ulysses_last_failure(None) == b""
    with pytest.raises(expected, match="null handle" if _dist_abi.available() else "without the distributed layer"):
        _status(lib().xstage_testing_ulysses_withhold_flags(None, 1))


def test_c_abi_ulysses_precision_bad_input():
    """The *_with_precision entries take c_api.h's XSTAGE_ATTN_PRECISION_* codes and name `precision` and the
    value for any other; the unsuffixed entries are these with BF16."""
    out = ctypes.c_void_p()
    call = _dist_abi.UlyssesCall()
    fp8 = _native.PRECISIONS["fp8"]
    if not _dist_abi.available():
        # Without the distributed layer the precision is not checked; a null team is still bad input.
        with pytest.raises(ValueError, match="team: null"):
            _status(lib().xstage_ulysses_create_with_precision(None, 1024, 24, 128, 0, 10.0, fp8, ctypes.byref(out)))
        assert out.value is None
        with pytest.raises(RuntimeError, match="without the distributed layer"):
            _status(lib().xstage_ulysses_forward_with_precision(None, ctypes.byref(call), fp8))
        return
    for bad in (2, -1, 7):
        with pytest.raises(ValueError, match=f"precision: {bad}; accepted: 0 \\(XSTAGE_ATTN_PRECISION_BF16\\), 1 "):
            _status(lib().xstage_ulysses_create_with_precision(None, 1024, 24, 128, 0, 10.0, bad, ctypes.byref(out)))
        assert out.value is None
    # A good precision reaches the next check.
    for good in _native.PRECISIONS.values():
        with pytest.raises(ValueError, match="team: null"):
            _status(lib().xstage_ulysses_create_with_precision(None, 1024, 24, 128, 0, 10.0, good, ctypes.byref(out)))
    with pytest.raises(ValueError, match="null handle"):
        _status(lib().xstage_ulysses_forward_with_precision(None, ctypes.byref(call), fp8))
    with pytest.raises(ValueError, match="null handle"):
        _status(lib().xstage_ulysses_check_with_precision(None, ctypes.byref(call), fp8))
    with pytest.raises(ValueError, match="null handle"):
        _status(lib().xstage_ulysses_reserve_with_precision(None, 10, 0, fp8))


@pytest.mark.parametrize("value,exc", [("fp16", ValueError), ("FP8", ValueError), ("", ValueError), (8, TypeError),
                                       (None, TypeError), (b"fp8", TypeError)])
def test_precision_arg_names_precision_and_value(value, exc):
    with pytest.raises(exc, match=r"t: precision .*; accepted: .*'bf16', 'fp8'"):
        _dist_abi.precision_arg(value, "t")
    assert _dist_abi.precision_arg("fp8", "t") == "fp8" and _dist_abi.precision_arg("bf16", "t") == "bf16"


def test_timeout_status_is_a_timeout_error():
    with pytest.raises(TimeoutError):
        _dist_abi.raise_for(_dist_abi.ERR_TIMEOUT, "t")


# --- with torch -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def torch_mod():
    return pytest.importorskip("torch")


@pytest.fixture(scope="module")
def xdist(torch_mod):
    import xstage.distributed as xd
    return xd


def bf16(torch, *shape):
    return torch.zeros(*shape, dtype=torch.bfloat16)


@pytest.mark.parametrize("change,exc,needle", [
    (dict(q="not a tensor"), TypeError, "q is a str"),
    (dict(k="float32"), TypeError, "k: dtype float32; accepted: bfloat16"),
    (dict(v=(1, 8, 4)), ValueError, r"v: shape \[1, 8, 4\]; accepted: 4 dimensions"),
    (dict(k=(1, 9, 4, 128)), ValueError, r"k: shape \[1, 9, 4, 128\]; accepted: q's shape"),
    (dict(world=3), ValueError, r"heads 4 \(q shape \[1, 8, 4, 128\]\) not divisible by the group's world size 3"),
    (dict(q=(1, 8, 4, 64), k=(1, 8, 4, 64), v=(1, 8, 4, 64)), ValueError, "head_dim 64"),
    (dict(joint_strategy="front"), ValueError, "joint_strategy 'front'"),
    (dict(joint_strategy=3), ValueError, "joint_strategy 3"),
    (dict(joint_k=(1, 5, 4, 128)), ValueError, "joint_k and joint_v: give both or neither"),
    (dict(joint_q=(1, 5, 4, 128)), ValueError, "joint_q needs joint_k and joint_v"),
    (dict(joint_k=(1, 5, 4, 128), joint_v=(1, 6, 4, 128)), ValueError, r"joint_v: shape \[1, 6, 4, 128\]; accepted: \[1, 5"),
    (dict(joint_k=(1, 5, 2, 128), joint_v=(1, 5, 2, 128)), ValueError, r"joint_k: shape \[1, 5, 2, 128\]"),
    (dict(joint_k=(1, 5, 4, 128), joint_v=(1, 5, 4, 128), joint_strategy="none"), ValueError, "joint_strategy 'none'"),
    (dict(), ValueError, "q: device cpu; accepted: a CUDA device"),   # every other check passes on CPU tensors
])
def test_input_checks_name_the_argument(torch_mod, xdist, change, exc, needle):
    from xstage import _dist_ulysses
    torch = torch_mod
    args = {"q": (1, 8, 4, 128), "k": (1, 8, 4, 128), "v": (1, 8, 4, 128), "joint_q": None, "joint_k": None,
            "joint_v": None, "joint_strategy": "rear", "world": 2}
    args.update(change)

    def make(x):
        if isinstance(x, tuple):
            return bf16(torch, *x)
        if x == "float32":
            return torch.zeros(1, 8, 4, 128)
        return x

    tensors = {n: make(args[n]) for n in ("q", "k", "v", "joint_q", "joint_k", "joint_v")}
    with pytest.raises(exc, match=needle):
        _dist_ulysses._check_inputs(tensors["q"], tensors["k"], tensors["v"], tensors["joint_q"], tensors["joint_k"],
                            tensors["joint_v"], args["joint_strategy"], args["world"], 0, "xstage.distributed.t")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ulysses_attention_precision_is_checked_first(torch_mod, xdist):
    """A bad precision is refused before the group, the team or the tensors are looked at."""
    q = bf16(torch_mod, 1, 8, 4, 128)
    for bad, exc in (("int8", ValueError), (8, TypeError)):
        with pytest.raises(exc, match=r"ulysses_attention: precision .*; accepted: .*'bf16', 'fp8'"):
            xdist.ulysses_attention(q, q, q, precision=bad)


def test_group_checks(torch_mod, xdist):
    import torch.distributed as dist
    torch = torch_mod
    if dist.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    q = bf16(torch, 1, 8, 4, 128)
    with pytest.raises(ValueError, match="torch.distributed is not initialized"):
        xdist.ulysses_attention(q, q, q)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)
    try:
        with pytest.raises(ValueError, match="group has backend 'gloo'; accepted: a group with the NCCL backend"):
            xdist.Team()
        with pytest.raises(ValueError, match="backend 'gloo'"):
            xdist.ulysses_attention(q, q, q)
        with pytest.raises(TypeError, match="group is a str"):
            xdist.Team("world")
        with pytest.raises(ValueError, match="timeout 0; accepted: a positive finite number of seconds"):
            xdist.UlyssesAttention(timeout=0)
        with pytest.raises(ValueError, match="joint_strategy 'front'"):
            xdist.UlyssesAttention(joint_strategy="front")
        with pytest.raises(TypeError, match="wait_timeout is a str"):
            xdist.UlyssesAttention(wait_timeout="10")
        with pytest.raises(ValueError, match="UlyssesAttention: precision 'fp16'; accepted: 'bf16', 'fp8'"):
            xdist.UlyssesAttention(precision="fp16")
        assert "precision='fp8'" in repr(xdist.UlyssesAttention(precision="fp8"))
    finally:
        dist.destroy_process_group()


# --- diffusers' context parallelism through the registered backend (CPU stand-in for the Ulysses kernel) ------------


def _cp_config(degree=2, ring=1, anything=False, group="GROUP"):
    mesh = types.SimpleNamespace(get_group=lambda: group)
    cp = types.SimpleNamespace(ring_degree=ring, ulysses_degree=degree, ulysses_anything=anything, _ulysses_mesh=mesh)
    return types.SimpleNamespace(context_parallel_config=cp)


def _routed(torch, parallel_config, q_shape=(1, 8, 2, 16), k_shape=None, **kw):
    import xstage.integrations.diffusers as xd
    from xstage.integrations import _diffusers_backend as xdb
    seen = []

    def fn(q, k, v, scale):
        raise AssertionError("the local kernel must not run on a context-parallel call")

    def ulysses(q, k, v, scale, group, seq_len):
        seen.append((group, seq_len, tuple(q.shape)))
        return q * 2

    kernel = xd.AttentionKernel("cpu_ulysses", fn, "cpu", (torch.float32,), (16,), False, ulysses)
    inner_calls = []

    def inner(query, key, value, **kwargs):
        inner_calls.append(kwargs)
        return "previous"

    backend = xdb._Backend(kernel)
    q = torch.randn(*q_shape)
    k = torch.randn(*(k_shape or q_shape))
    original = xdb._fallback_target
    xdb._fallback_target = lambda b: ("PREV", inner, {"query", "key", "value", "attn_mask", "dropout_p", "is_causal",
                                                       "scale", "enable_gqa", "return_lse", "_parallel_config"})
    try:
        out = xdb._call_backend(backend, dict(query=q, key=k, value=torch.randn(*k.shape),
                                              _parallel_config=parallel_config, **kw))
    finally:
        xdb._fallback_target = original
    return out, q, seen, inner_calls, backend.stats.as_dict([])


def test_diffusers_ulysses_call_runs_the_ulysses_kernel(torch_mod):
    pytest.importorskip("diffusers")
    out, q, seen, inner, s = _routed(torch_mod, _cp_config(degree=2))
    assert inner == [] and seen == [("GROUP", 16, (1, 8, 2, 16))]   # seq_len = degree * S_local
    assert torch_mod.equal(out, q * 2)
    assert s["routed"] == 1 and s["routed_context_parallel"] == 1 and s["fallback"] == {}


def test_diffusers_ulysses_anything_gathers_the_lengths(torch_mod):
    pytest.importorskip("diffusers")
    _, _, seen, _, _ = _routed(torch_mod, _cp_config(degree=3, anything=True))
    assert seen == [("GROUP", None, (1, 8, 2, 16))]


@pytest.mark.parametrize("config,kw,reason", [
    (_cp_config(ring=2), {}, "context_parallel"),
    (object(), {}, "context_parallel"),
    (_cp_config(), {"k_shape": (1, 5, 2, 16)}, "context_parallel_cross"),
    (_cp_config(), {"attn_mask": "MASK"}, "attn_mask"),
    (_cp_config(), {"is_causal": True}, "causal"),
])
def test_diffusers_context_parallel_fallbacks_keep_the_config(torch_mod, config, kw, reason):
    pytest.importorskip("diffusers")
    k_shape = kw.pop("k_shape", None)
    if kw.get("attn_mask") == "MASK":
        kw["attn_mask"] = torch_mod.ones(1, 1, 1, 8, dtype=torch_mod.bool)
    out, _, seen, inner, s = _routed(torch_mod, config, k_shape=k_shape, **kw)
    assert out == "previous" and seen == [] and s["fallback"] == {reason: 1}
    assert inner[0]["_parallel_config"] is config


def test_id_exchange_names_the_ranks_that_did_not_arrive(torch_mod, xdist):
    import torch.distributed as dist

    from xstage import _dist_team
    store = dist.HashStore()
    # Rank 2 of 3 arrives alone: ranks 0 and 1 are named, within the timeout.
    with pytest.raises(TimeoutError, match=r"rank 2 of 3: step 'unique id exchange'.*ranks \[0, 1\].*0.5 s"):
        _dist_team._store_exchange(store, "t", 2, 3, 0.5)
    # A one-rank group: rank 0 publishes the id and reads it back.
    store2 = dist.HashStore()
    assert _dist_team._store_exchange(store2, "u", 0, 1, 5.0, make_id=lambda: b"ID") == b"ID"


# --- xstage.distributed.FusedMoE: arguments, and the bounded wait's errors ------------------------------------


@pytest.mark.parametrize("change,exc,needle", [
    (dict(w1="not a tensor"), TypeError, "w1 is a builtins.str"),
    (dict(w1=(8, 256)), ValueError, r"w1 has shape \(8, 256\); accepted: 3 dimensions"),
    (dict(w2=(4, 128, 64)), ValueError, r"w2 has shape \(4, 128, 64\); accepted: \[4, 256, 128\]"),
    (dict(dtype="float32"), TypeError, "w1 has dtype torch.float32"),
    (dict(precision="int4"), ValueError, "precision 'int4'"),
    (dict(wait_timeout=0), ValueError, "wait_timeout 0; accepted: a positive finite number"),
    (dict(wait_timeout=30.0), ValueError, "wait_timeout 30.0; accepted: at most 10 seconds"),
    (dict(timeout="long"), TypeError, "timeout is a str"),
    (dict(top_k=0), ValueError, "top_k 0; accepted: an int >= 1"),
    (dict(top_k=2.0), TypeError, "top_k is a float"),
    (dict(schedule="ring"), ValueError, "schedule 'ring'"),
    (dict(), ValueError, "w1 is on cpu, w2 on cpu; accepted: one CUDA device"),  # every other check passes on CPU
])
def test_fused_moe_arguments_are_named(torch_mod, xdist, change, exc, needle):
    torch = torch_mod
    args = dict(w1=(4, 256, 256), w2=(4, 256, 128), dtype="bfloat16", top_k=2, precision=None, wait_timeout=10.0,
                timeout=60.0, schedule="interleaved")
    args.update(change)
    dtype = getattr(torch, args.pop("dtype"))
    make = lambda x: torch.zeros(*x, dtype=dtype) if isinstance(x, tuple) else x  # noqa: E731
    w1, w2 = make(args.pop("w1")), make(args.pop("w2"))
    with pytest.raises(exc, match=needle):
        xdist.FusedMoE(w1, w2, **args)


class _FakeLayer:
    def __init__(self, failure=""):
        self.failure = failure

    def last_failure(self):
        return self.failure


class _FakeEvent:
    """torch.cuda.Event stand-in: query() answers `answer` (an exception to raise, or a bool)."""
    answer = False

    def record(self, stream=None):
        pass

    def query(self):
        if isinstance(_FakeEvent.answer, BaseException):
            raise _FakeEvent.answer
        return _FakeEvent.answer


def _fake_team(xdist, monkeypatch, failure):
    import weakref
    team = object.__new__(xdist.Team)
    team.rank, team.world, team.device = 1, 2, 0
    team._moe_layers = weakref.WeakSet()
    team._ulysses = {}
    layer = _FakeLayer(failure)
    team._adopt(layer)
    import torch
    monkeypatch.setattr(torch.cuda, "Event", _FakeEvent)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: None)
    return team, layer


def test_team_synchronize_names_the_rank_and_the_expired_wait(torch_mod, xdist, monkeypatch):
    """A trapped kernel (the stream's event query raises): the error names this rank and the recorded wait."""
    record = ("rank 1 block 3 thread 128 timed out waiting for the count flag of a source rank (index 0: wanted 5, "
              "saw 4)")
    team, layer = _fake_team(xdist, monkeypatch, "")
    _FakeEvent.answer = RuntimeError("CUDA error: unspecified launch failure")

    def trap_then_record():  # the record is written before the trap, read after the query fails
        layer.failure = record
        raise _FakeEvent.answer
    monkeypatch.setattr(_FakeEvent, "query", lambda self: trap_then_record())
    with pytest.raises(TimeoutError, match=r"Team.synchronize: rank 1 of 2: an in-kernel wait expired: rank 1 .*"
                                           r"count flag of a source rank \(index 0"):
        team.synchronize(timeout=5.0)
    # Later calls raise at once, before touching the device.
    with pytest.raises(TimeoutError, match="rank 1 of 2: an in-kernel wait expired"):
        team._raise_failures("xstage.distributed.FusedMoE")


def test_team_failures_name_an_expired_ulysses_wait(torch_mod, xdist, monkeypatch):
    """The Ulysses owner's record (xstage_ulysses_last_failure) is one of the team's failures: synchronize() and a
    later ulysses_attention raise TimeoutError naming this rank, the source rank and the step."""
    import types
    record = ("rank 1 timed out after 1.00 s waiting for the post-attention All-to-All (Ulysses attention: the "
              "owner's wait for source rank 0, CTA 7: flag wanted epoch 3, saw 2; that rank did not store its rows)")
    team, _ = _fake_team(xdist, monkeypatch, "")
    records = {11: b"", 12: record.encode()}
    fake = types.SimpleNamespace(xstage_ulysses_last_failure=lambda handle: records[handle.value])
    monkeypatch.setattr(_dist_abi, "lib", lambda: fake)
    team._ulysses = {(4, 128, 10.0): [ctypes.c_void_p(11), 64, 0, False],
                     (8, 128, 10.0): [ctypes.c_void_p(12), 64, 0, False]}
    assert team.failures() == [record]
    _FakeEvent.answer = True  # the queue looks done: the record still wins
    with pytest.raises(TimeoutError, match=r"Team.synchronize: rank 1 of 2: an in-kernel wait expired: rank 1 timed "
                                           r"out .* post-attention All-to-All .* source rank 0, CTA 7"):
        team.synchronize(timeout=1.0)
    records[12] = b""
    assert team.failures() == []
    team.synchronize(timeout=1.0)


def test_team_synchronize_is_bounded(torch_mod, xdist, monkeypatch):
    import time
    team, _ = _fake_team(xdist, monkeypatch, "")
    _FakeEvent.answer = False  # never completes
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match=r"rank 1 of 2: the enqueued work did not finish within 0.2 s"):
        team.synchronize(timeout=0.2)
    assert time.monotonic() - t0 < 2.0
    _FakeEvent.answer = True
    team.synchronize(timeout=0.2)
    _FakeEvent.answer = RuntimeError("CUDA error: an illegal memory access was encountered")
    with pytest.raises(RuntimeError, match="rank 1 of 2: the device reported an error"):
        team.synchronize(timeout=0.2)
    with pytest.raises(ValueError, match="timeout -1"):
        team.synchronize(timeout=-1)
