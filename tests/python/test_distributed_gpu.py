"""xstage.distributed on Hopper GPUs, through a real NCCL process group.

Run with torchrun (`torchrun --nproc_per_node N -m pytest tests/python/test_distributed_gpu.py`, any N the machine
has GPUs for) or plain pytest (a one-process NCCL group is created). Four parts:
  (a) ulysses_attention against xstage.attention on the whole sequence, bit for bit: every rank holds its
      torch.chunk shard of the same random q, k, v (uneven shards where world > 1), with and without replicated
      joint k/v and joint q; repeated calls (the flag/epoch protocol), a grown buffer, strided inputs (copied);
  (b) one rank of a 2- and 3-rank team emulated on one GPU through the C ABI's testing entry (every owner's buffer
      local): every row reaches its owner's buffer, bit for bit, every other element stays poisoned;
  (a, b) at precision "fp8" too, against xstage.attention(..., precision="fp8") on the whole sequence, bit for
      bit (the pre-pass scales each query row on its own and K, V in sequence order, whatever the split), and a
      bf16 object grown to fp8;
  (c) diffusers' context parallelism (ContextParallelConfig(ulysses_degree=world); world 1 is allowed by setting
      the degree after construction, which diffusers' constructor refuses) on Wan and Flux blocks through xstage:
      compared with diffusers' native backend without context parallelism. Tolerance: xstage's max and mean
      absolute errors against a float32 native run must be at most 2.0x and 1.2x those of the bf16 native run.
  (d) xstage.distributed.FusedMoE: each rank's experts and tokens against xstage.FusedMoE holding every expert, bit
      for bit; a step whose rows never arrive raises TimeoutError naming the rank and the wait (child process).
"""
import copy
import datetime
import os
import socket

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
    pytest.skip("needs a Hopper GPU (sm_90)", allow_module_level=True)
import torch.distributed as dist  # noqa: E402

import xstage  # noqa: E402
import xstage.distributed as xdist  # noqa: E402
from xstage import _dist_ulysses  # noqa: E402 - _testing_emulated_rank

MAX_RATIO, MEAN_RATIO = 2.0, 1.2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def group():
    """The world group: torchrun's (env://), else a one-process NCCL group made here."""
    made = False
    if not dist.is_initialized():
        if "RANK" not in os.environ:
            os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                              MASTER_PORT=str(_free_port()))
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=120),
                                device_id=torch.device("cuda", torch.cuda.current_device()))
        made = True
    yield dist.group.WORLD
    if made:
        torch.cuda.synchronize()
        xdist.Team(dist.group.WORLD).close()
        dist.destroy_process_group()


def full_inputs(seed, B, S, H, T=0, D=128):
    """The same tensors on every rank: [B, S, H, D] q, k, v and [B, T, H, D] joint q, k, v."""
    g = torch.Generator("cuda").manual_seed(seed)
    mk = lambda n: torch.randn(B, n, H, D, device="cuda", generator=g).to(torch.bfloat16)  # noqa: E731
    return [mk(S) for _ in range(3)], [mk(T) for _ in range(3)] if T else [None] * 3


def shard(t, world, rank):
    return t.chunk(world, dim=1)[rank].contiguous()


@pytest.mark.parametrize("joint", ["none", "kv", "qkv"])
def test_ulysses_matches_attention_bit_for_bit(group, joint):
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    B, H, T = 2, 4 * world, (0 if joint == "none" else 77)
    S = 1024 * world + (world - 1)           # uneven shards where world > 1 (torch.chunk: the last is shorter)
    (q, k, v), (jq, jk, jv) = full_inputs(11, B, S, H, T)
    if joint == "kv":
        jq = None
    kk = torch.cat([k, jk], 1) if jk is not None else k
    vv = torch.cat([v, jv], 1) if jv is not None else v
    ref = shard(xstage.attention(q, kk, vv), world, rank)
    res = xdist.ulysses_attention(shard(q, world, rank), shard(k, world, rank), shard(v, world, rank), group,
                                  joint_q=jq, joint_k=jk, joint_v=jv)
    out, jout = res if jq is not None else (res, None)
    assert out.shape == ref.shape and out.dtype == torch.bfloat16
    assert torch.equal(out, ref), f"rank {rank}: {(out.float() - ref.float()).abs().max().item()} max difference"
    if jq is not None:
        jref = xstage.attention(jq, kk, vv)
        assert torch.equal(jout, jref), f"rank {rank}: joint_out differs"


def fp8_attention(q, k, v):
    """xstage.attention at precision fp8 (the local FP8 path the Ulysses FP8 kernels must match)."""
    try:
        return xstage.attention(q, k, v, precision="fp8")
    except TypeError as e:
        if "precision" in str(e):
            pytest.skip(f"xstage.attention has no precision keyword in this build ({e})")
        raise


@pytest.mark.parametrize("joint", ["none", "kv", "qkv"])
def test_ulysses_fp8_matches_fp8_attention_bit_for_bit(group, joint):
    """FP8 Ulysses equals the local FP8 attention on the whole sequence, bit for bit, on uneven shards: each rank's
    rotated query order changes no query row's scale (one per row), and K and V keep the sequence order."""
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    B, H, T = 2, 4 * world, (0 if joint == "none" else 77)
    S = 1024 * world + (world - 1) + 333    # uneven shards where world > 1, no multiple of 64 either way
    (q, k, v), (jq, jk, jv) = full_inputs(21, B, S, H, T)
    if joint == "kv":
        jq = None
    kk = torch.cat([k, jk], 1) if jk is not None else k
    vv = torch.cat([v, jv], 1) if jv is not None else v
    ref = shard(fp8_attention(q, kk, vv), world, rank)
    res = xdist.ulysses_attention(shard(q, world, rank), shard(k, world, rank), shard(v, world, rank), group,
                                  joint_q=jq, joint_k=jk, joint_v=jv, precision="fp8")
    out, jout = res if jq is not None else (res, None)
    assert out.shape == ref.shape and out.dtype == torch.bfloat16
    assert torch.equal(out, ref), f"rank {rank}: {(out.float() - ref.float()).abs().max().item()} max difference"
    if jq is not None:
        assert torch.equal(jout, fp8_attention(jq, kk, vv)), f"rank {rank}: joint_out differs"
    # The FP8 path is FP8's, not bf16's: it differs from the bf16 result (within FP8's error).
    ref16 = shard(xstage.attention(q, kk, vv), world, rank)
    assert not torch.equal(out, ref16)
    rel_l1 = ((out.float() - ref16.float()).abs().sum() / ref16.float().abs().sum()).item()
    assert rel_l1 <= 6e-2, rel_l1   # the FP8 attention's correctness bound (tests/gpu/test_attn_fp8.cu)


def test_ulysses_bf16_object_grows_to_fp8_and_module_takes_precision(group):
    """A bf16 call first (the object is created for bf16), then fp8 on the same heads (reserved to fp8), then bf16
    again on the fp8 object: each equals its local reference."""
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    H, S = 6 * world, 512 * world
    (q, k, v), _ = full_inputs(31, 1, S, H)
    sq, sk, sv = (shard(t, world, rank) for t in (q, k, v))
    assert torch.equal(xdist.ulysses_attention(sq, sk, sv, group), shard(xstage.attention(q, k, v), world, rank))
    ref8 = shard(fp8_attention(q, k, v), world, rank)
    assert torch.equal(xdist.ulysses_attention(sq, sk, sv, group, precision="fp8"), ref8)
    assert torch.equal(xdist.ulysses_attention(sq, sk, sv, group), shard(xstage.attention(q, k, v), world, rank))
    module = xdist.UlyssesAttention(group, precision="fp8")
    assert torch.equal(module(sq, sk, sv), ref8)
    with pytest.raises(ValueError, match="precision 'e4m3'"):
        xdist.ulysses_attention(sq, sk, sv, group, precision="e4m3")


def test_repeated_calls_growth_strides_and_seq_len(group):
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    H = 2 * world
    for i, S in enumerate([512 * world, 512 * world, 3000 * world + 1, 640 * world]):   # the third grows the buffers
        (q, k, v), _ = full_inputs(100 + i, 1, S, H)
        ref = shard(xstage.attention(q, k, v), world, rank)
        out = xdist.ulysses_attention(shard(q, world, rank), shard(k, world, rank), shard(v, world, rank), group,
                                      seq_len=S)
        assert torch.equal(out, ref), f"call {i} (S {S}) on rank {rank}"
    # A strided q (heads and sequence transposed back): copied to a contiguous tensor, same result.
    (q, k, v), _ = full_inputs(7, 1, 256 * world, H)
    qs = shard(q, world, rank).transpose(1, 2).contiguous().transpose(1, 2)
    assert not qs.is_contiguous()
    out = xdist.ulysses_attention(qs, shard(k, world, rank), shard(v, world, rank), group)
    assert torch.equal(out, shard(xstage.attention(q, k, v), world, rank))
    local = shard(q, world, rank)
    with pytest.raises(ValueError, match="seq_len"):
        xdist.ulysses_attention(local, local, local, group, seq_len=256 * world + world + 1)
    module = xdist.UlyssesAttention(group)
    assert torch.equal(module(local, shard(k, world, rank), shard(v, world, rank)),
                       shard(xstage.attention(q, k, v), world, rank))


def test_nccl_init_of_a_missing_rank_times_out_naming_rank_and_step():
    """Rank 0 of a 2-rank team whose rank 1 never comes: the non-blocking NCCL initialization is polled for the
    timeout, aborted, and reported as TimeoutError naming the rank and the step. In a child process, so that a
    hang (the failure this guards against) cannot stall the test run."""
    import subprocess
    import sys
    code = (
        "import ctypes, torch\n"
        "from xstage import _dist_abi, _dist_team\n"
        "uid = _dist_team._new_unique_id()\n"
        "h = ctypes.c_void_p()\n"
        "s = _dist_abi.lib().xstage_team_create(uid, len(uid), 0, 2, 0, 3.0, ctypes.byref(h))\n"
        "try:\n"
        "    _dist_abi.raise_for(s, 'team')\n"
        "except TimeoutError as e:\n"
        "    print('TIMEOUT', e)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "TIMEOUT" in r.stdout, (r.returncode, r.stdout, r.stderr[-2000:])
    assert "rank 0 of 2" in r.stdout and "ncclCommInitRankConfig" in r.stdout and "3.0 s" in r.stdout, r.stdout


# --- xstage.distributed.FusedMoE: expert parallel over the group ------------------------------------------------

MOE_HIDDEN, MOE_INTER, MOE_EXPERTS_PER_RANK, MOE_TOP_K = 384, 256, 4, 3


def _moe_weights(seed, experts):
    g = torch.Generator("cuda").manual_seed(seed)
    w1 = (torch.randn(experts, 2 * MOE_INTER, MOE_HIDDEN, device="cuda", generator=g) * 0.06).bfloat16()
    w2 = (torch.randn(experts, MOE_HIDDEN, MOE_INTER, device="cuda", generator=g) * 0.06).bfloat16()
    return w1, w2


def _moe_call(seed, tokens, experts):
    g = torch.Generator("cuda").manual_seed(seed)
    x = torch.randn(tokens, MOE_HIDDEN, device="cuda", generator=g).bfloat16()
    ids = torch.rand(tokens, experts, device="cuda", generator=g).argsort(dim=1)[:, :MOE_TOP_K].to(torch.int32)
    wts = torch.softmax(torch.randn(tokens, MOE_TOP_K, device="cuda", generator=g), dim=1)
    return x, ids, wts


@pytest.mark.parametrize("precision", ["bf16", "fp8"])
def test_fused_moe_over_the_group_equals_the_one_gpu_layer(group, precision):
    """Each rank holds its slice of the experts and its own tokens (a different count per rank, none at one step);
    its output equals xstage.FusedMoE holding every expert on the same tokens, bit for bit (each token's rows are
    computed alike wherever its experts live), run after run. The output is poisoned before each step."""
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    experts = MOE_EXPERTS_PER_RANK * world
    w1, w2 = _moe_weights(7, experts)  # the same on every rank
    mine = slice(rank * MOE_EXPERTS_PER_RANK, (rank + 1) * MOE_EXPERTS_PER_RANK)
    layer = xdist.FusedMoE.from_bf16(w1[mine].contiguous(), w2[mine].contiguous(), top_k=MOE_TOP_K, group=group,
                                     precision=precision, max_tokens=600)
    alone = xstage.FusedMoE.from_bf16(w1, w2, top_k=MOE_TOP_K, precision=precision, max_tokens=600)
    assert (layer.rank, layer.world, layer.experts) == (rank, world, experts)
    assert list(layer.expert_range) == list(range(experts))[mine]
    for step, tokens in enumerate([600 - 37 * rank, 0 if rank == world - 1 else 5, 131 + rank, 600]):
        x, ids, wts = _moe_call(1000 * step + rank, tokens, experts)
        want = alone(x, ids, wts)
        got = layer(x, ids, wts)
        layer.synchronize()
        assert got.shape == x.shape
        assert torch.isfinite(got.float()).all(), f"step {step}: elements not written"
        assert torch.equal(got, want), f"{precision} step {step} T={tokens}: differs from the one-GPU layer"
    info = layer.info()
    assert info["runs"] == 4 and info["rank"] == rank and info["world"] == world
    assert layer.last_failure() == "" and xdist.Team(group).failures() == []


def _expired_wait_child(setup: str, launch: str, sync: str):
    """Runs, in a child process with its own one-rank NCCL group (the trap loses the CUDA context): `setup` (which
    arms a wait that cannot be met), then `launch` (the forward whose wait expires), `sync` (which must raise
    TimeoutError) and `launch` again (which must raise before any launch). Returns the TimeoutError line, the
    child's stdout, the seconds from the launch to the error (checked below 15) and the child's run time."""
    import subprocess
    import sys
    import time
    code = ("import os, time, torch, torch.distributed as dist\n"
            "import xstage.distributed as xd\n"
            "from xstage import _dist_abi, _moe_abi\n"
            "torch.cuda.set_device(0)\n"
            "dist.init_process_group('nccl', init_method='tcp://127.0.0.1:PORT', rank=0, world_size=1)\n"
            + setup +
            "t0 = time.monotonic()\n"
            + launch + "\n"
            "try:\n"
            "    " + sync + "\n"
            "except TimeoutError as e:\n"
            "    print(f'TIMEOUT after {time.monotonic() - t0:.1f} s:', e, flush=True)\n"
            "try:\n"
            "    " + launch + "\n"
            "except TimeoutError as e:\n"
            "    print('FORWARD', e, flush=True)\n"
            "os._exit(0)\n").replace("PORT", str(_free_port()))
    # The child makes its own one-rank group: none of a launcher's rendezvous variables (torchrun's agent store).
    launcher = ("TORCHELASTIC_", "MASTER_", "RANK", "WORLD_SIZE", "LOCAL_", "GROUP_", "ROLE_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(launcher)}
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert "TIMEOUT" in r.stdout, (r.returncode, r.stdout, r.stderr[-3000:])
    line = next(s for s in r.stdout.splitlines() if s.startswith("TIMEOUT"))
    waited = float(line.split("after ")[1].split(" s")[0])
    assert waited < 15.0, f"the error came {waited} s after the launch (wait_timeout 1 s)"
    return line, r.stdout, waited, time.monotonic() - t0


def test_fused_moe_wait_for_a_rank_that_does_not_arrive_raises_naming_rank_and_step():
    """A step in which rows never arrive (xstage_testing_moe_withhold_rows: as when a peer rank does not dispatch):
    the kernel's bounded wait expires after wait_timeout, records itself and traps; synchronize() raises
    TimeoutError naming the rank and the wait within the timeout, and a later forward raises before any launch.
    In a child process of its own (a one-rank NCCL group): the trap loses the CUDA context."""
    line, out, waited, ran = _expired_wait_child(
        "g = torch.Generator('cuda').manual_seed(1)\n"
        "w1 = (torch.randn(4, 512, 384, device='cuda', generator=g) * 0.06).bfloat16()\n"
        "w2 = (torch.randn(4, 384, 256, device='cuda', generator=g) * 0.06).bfloat16()\n"
        "x = torch.randn(64, 384, device='cuda', generator=g).bfloat16()\n"
        "ids = torch.arange(64 * 2, device='cuda', dtype=torch.int32).reshape(64, 2) % 4\n"
        "wts = torch.full((64, 2), 0.5, device='cuda')\n"
        "layer = xd.FusedMoE(w1, w2, top_k=2, max_tokens=64, wait_timeout=1.0)\n"
        "layer(x, ids, wts); layer.synchronize()\n"
        "assert _moe_abi._lib().xstage_testing_moe_withhold_rows(layer._layer.handle('t'), 1) == 0\n",
        "layer(x, ids, wts)", "layer.synchronize(timeout=30)")
    assert "Team.synchronize: rank 0 of 1: an in-kernel wait expired: rank 0 " in line, line
    # The first wait to expire is recorded: the producers' wait for the withheld rows, or the consumers' wait for
    # the stage those producers never fill (both bounded by wait_timeout, started together).
    assert " timed out waiting for the " in line and ("arrival counter" in line or "pipeline stage" in line), line
    assert "FORWARD xstage.distributed.FusedMoE: rank 0 of 1: an in-kernel wait expired" in out, out
    print(f"[distributed moe] expired wait reported after {waited:.1f} s (child ran {ran:.1f} s)")


def test_ulysses_wait_for_a_rank_that_does_not_arrive_raises_naming_rank_and_step():
    """A forward whose owner waits for stores that never come (xstage_testing_ulysses_withhold_flags: as when a peer
    rank does not run its attention): the owner's bounded wait expires after wait_timeout, records itself and traps;
    Team.synchronize() raises TimeoutError naming the rank, the source rank and the step within the timeout, and a
    later ulysses_attention raises before any launch. In a child process (a one-rank NCCL group): the trap loses the
    CUDA context."""
    line, out, waited, ran = _expired_wait_child(
        "g = torch.Generator('cuda').manual_seed(2)\n"
        "q, k, v = (torch.randn(1, 512, 2, 128, device='cuda', generator=g).bfloat16() for _ in range(3))\n"
        "xd.ulysses_attention(q, k, v, wait_timeout=1.0); team = xd.Team(); team.synchronize()\n"
        "assert team.failures() == []\n"
        "handle = team.ulysses(2, 128, 512, 0, 1.0)\n"
        "assert _dist_abi.lib().xstage_testing_ulysses_withhold_flags(handle, 1) == 0\n",
        "xd.ulysses_attention(q, k, v, wait_timeout=1.0)", "team.synchronize(timeout=30)")
    assert "Team.synchronize: rank 0 of 1: an in-kernel wait expired: rank 0 timed out after " in line, line
    assert "waiting for the post-attention All-to-All (Ulysses attention: the owner's wait for source rank 0" in line
    # The second forward publishes epoch 2; withheld by one, its owner awaits 3.
    assert "flag wanted epoch 3, saw 2" in line, line
    assert "FORWARD xstage.distributed.ulysses_attention: rank 0 of 1: an in-kernel wait expired" in out, out
    print(f"[distributed ulysses] expired wait reported after {waited:.1f} s (child ran {ran:.1f} s)")


def test_team_is_cached_per_group(group):
    assert xdist.Team(group) is xdist.Team(group)
    assert xdist.Team(group).world == dist.get_world_size(group)


@pytest.mark.parametrize("precision", ["bf16", "fp8"])
@pytest.mark.parametrize("world,seq,joint", [(2, 3077, 0), (3, 1000, 0), (3, 2048 + 2, 40), (2, 200, 5)])
def test_emulated_rank_stores_every_row_to_its_owner(world, seq, joint, precision):
    hl, D = 2, 128
    H = hl * world
    g = torch.Generator("cuda").manual_seed(seq + world)
    mk = lambda n: torch.randn(1, n, hl, D, device="cuda", generator=g).to(torch.bfloat16)  # noqa: E731
    q, k, v = mk(seq), mk(seq + joint), mk(seq + joint)
    for rank in range(world):
        info = xdist.shard_info(seq, world, rank)
        rot = info["rotation"]
        q_kernel = torch.roll(q, shifts=-rot, dims=1).contiguous()   # kernel row i is sequence row (i + rot) % seq
        # The local attention of the kernel-order Q, back in sequence order.
        local = fp8_attention(q_kernel, k, v) if precision == "fp8" else xstage.attention(q_kernel, k, v)
        ref = torch.roll(local[0], shifts=rot, dims=0)      # [seq, hl, D], sequence order
        outs = [torch.full((xdist.shard_info(seq, world, p)["local_len"], H, D), float("nan"), dtype=torch.bfloat16,
                           device="cuda") for p in range(world)]
        _dist_ulysses._testing_emulated_rank(q_kernel, k, v, H, rank, world, outs, precision=precision)
        shard_len = info["shard_len"]
        for p, o in enumerate(outs):
            rows = ref[p * shard_len:p * shard_len + o.shape[0]]
            mine = o[:, rank * hl:(rank + 1) * hl]
            assert torch.equal(mine, rows), f"world {world} rank {rank}: owner {p}'s rows differ"
            others = torch.cat([o[:, :rank * hl], o[:, (rank + 1) * hl:]], 1)
            assert torch.isnan(others.float()).all(), f"world {world} rank {rank}: owner {p}: a foreign head written"


# --- (c) diffusers' context parallelism -------------------------------------------------------------------


def _errors(out, ref):
    d = (out.float() - ref.float()).abs()
    return d.max().item(), d.mean().item()


def _cp_compare(name, group, model32, inputs32):
    import xstage.integrations.diffusers as xd
    from diffusers import ContextParallelConfig

    world = dist.get_world_size(group)
    model16 = copy.deepcopy(model32).to(torch.bfloat16)
    inputs16 = {k: v.to(torch.bfloat16) if torch.is_floating_point(v) else v for k, v in inputs32.items()}
    cp_model = copy.deepcopy(model16)
    cp = ContextParallelConfig(ulysses_degree=max(world, 2))
    cp.ulysses_degree = world            # world 1: the constructor refuses degree 1, the rest of diffusers takes it
    cp_model.enable_parallelism(config=cp)
    with torch.inference_mode():
        ref = model32(**inputs32).sample
        native = model16(**inputs16).sample
        xd.enable(cp_model)
        try:
            # diffusers' context-parallel hooks take the root module's tuple output only (return_dict=False).
            ours = cp_model(**inputs16, return_dict=False)[0]
            s = xd.stats(cp_model)
        finally:
            xd.disable(cp_model)
    assert torch.isfinite(ours).all()
    (max_n, mean_n), (max_x, mean_x) = _errors(native, ref), _errors(ours, ref)
    print(f"\n{name} (context parallel, world {world}): |native bf16 - fp32| max {max_n:.3e} mean {mean_n:.3e}; "
          f"|xstage CP - fp32| max {max_x:.3e} mean {mean_x:.3e}; stats {s['routed_context_parallel']} Ulysses, "
          f"fallback {s['fallback']}")
    assert max_x <= MAX_RATIO * max_n, (max_x, max_n)
    assert mean_x <= MEAN_RATIO * mean_n, (mean_x, mean_n)
    return s


def _build(cls, **config):
    torch.manual_seed(0)
    with torch.device("cuda"):
        return cls(**config).eval()


def test_diffusers_wan_context_parallel_through_xstage(group):
    pytest.importorskip("diffusers")
    from diffusers import WanTransformer3DModel
    world = dist.get_world_size(group)
    model = _build(WanTransformer3DModel, num_layers=1, num_attention_heads=8, attention_head_dim=128, ffn_dim=2048,
                   text_dim=256, freq_dim=256)
    g = torch.Generator("cuda").manual_seed(1)
    inputs = dict(hidden_states=torch.randn(1, 16, 4, 32, 32, device="cuda", generator=g),   # 4*16*16 = 1024 tokens
                  timestep=torch.tensor([500], device="cuda"),
                  encoder_hidden_states=torch.randn(1, 128, 256, device="cuda", generator=g))
    s = _cp_compare("Wan block", group, model, inputs)
    # Self-attention runs the Ulysses step in xstage; Wan's cross-attention passes no parallel_config (the text is
    # not sharded), so its sharded queries attend to the whole text locally, on xstage's kernel.
    assert s["routed"] == 2 and s["routed_context_parallel"] == 1 and s["fallback_total"] == 0
    n = 1024 // world
    assert sorted(r["shape"] for r in s["routed_by_shape"]) == sorted([[1, n, n, 8, 128], [1, n, 128, 8, 128]])


def test_diffusers_flux_context_parallel_through_xstage(group):
    pytest.importorskip("diffusers")
    from diffusers import FluxTransformer2DModel
    world = dist.get_world_size(group)
    model = _build(FluxTransformer2DModel, num_layers=1, num_single_layers=1, num_attention_heads=8,
                   attention_head_dim=128, joint_attention_dim=256, pooled_projection_dim=64, guidance_embeds=False)
    g = torch.Generator("cuda").manual_seed(2)
    ids = torch.stack(torch.meshgrid(torch.zeros(1), torch.arange(32.0), torch.arange(32.0), indexing="ij"), -1)
    inputs = dict(hidden_states=torch.randn(1, 1024, 64, device="cuda", generator=g),
                  encoder_hidden_states=torch.randn(1, 256, 256, device="cuda", generator=g),
                  pooled_projections=torch.randn(1, 64, device="cuda", generator=g),
                  timestep=torch.tensor([0.5], device="cuda"),
                  img_ids=ids.reshape(-1, 3).cuda(), txt_ids=torch.zeros(256, 3, device="cuda"))
    s = _cp_compare("Flux 1+1 blocks", group, model, inputs)
    # Joint (text + image) attention of both blocks: the sharded text and image rows, one Ulysses step each.
    assert s["routed_context_parallel"] == 2 and s["fallback_total"] == 0


def test_xdit_layer_matches_xfusers_rear_joint_semantics(group):
    """xfuser's "rear" joint attention: each rank's query is its rows followed by the replicated joint rows; keys and
    values the sequence's, then the joint ones (this rank's heads); the output is this rank's rows then the joint
    rows, all heads. Checked against xstage.attention on the whole sequence, bit for bit."""
    from xstage.integrations.xdit import UlyssesAttention
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    (q, k, v), (jq, jk, jv) = full_inputs(5, 1, 512 * world, 2 * world, T=64)
    kk, vv = torch.cat([k, jk], 1), torch.cat([v, jv], 1)
    ref = torch.cat([shard(xstage.attention(q, kk, vv), world, rank), xstage.attention(jq, kk, vv)], 1)
    layer = UlyssesAttention(group)
    out = layer(None, shard(q, world, rank), shard(k, world, rank), shard(v, world, rank), joint_tensor_query=jq,
                joint_tensor_key=jk, joint_tensor_value=jv, joint_strategy="rear")
    assert torch.equal(out, ref)
    with pytest.raises(ValueError, match="joint_strategy 'front'"):
        layer(None, shard(q, world, rank), shard(k, world, rank), shard(v, world, rank), joint_tensor_query=jq,
              joint_tensor_key=jk, joint_tensor_value=jv, joint_strategy="front")
    with pytest.raises(ValueError, match="causal True"):
        layer(None, q, k, v, causal=True)
