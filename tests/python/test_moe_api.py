"""xstage.moe without a GPU: the package imports without torch, bad arguments raise TypeError /
ValueError naming the argument before any library call or launch, and (with the library built) the
configuration checks of the C ABI name the field. The torch parts skip where torch is absent."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import xstage
from xstage import _native, moe


def _library_or_skip():
    try:
        return _native.lib()
    except _native.XstageLoadError as e:
        pytest.skip(f"libxstage_capi.so not built: {e}")


def test_import_without_torch():
    # A fresh interpreter where `import torch` fails: xstage and xstage.moe import, the torch parts say why.
    code = textwrap.dedent("""
        import sys
        sys.modules["torch"] = None  # import torch raises ImportError
        import xstage, xstage.moe
        try:
            xstage.moe.FusedMoE
        except ImportError as e:
            assert "PyTorch" in str(e), e
            print("ok")
        else:
            raise SystemExit("FusedMoE without torch did not raise ImportError")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


GOOD = dict(hidden=384, h_inter=256, experts=8, top_k=3, max_tokens=700)


@pytest.mark.parametrize("field, value, error", [
    ("precision", "int4", ValueError),
    ("precision", 1, TypeError),
    ("schedule", "ring", ValueError),
    ("schedule", 0, TypeError),
    ("hidden", "4096", TypeError),
    ("hidden", 4096.0, TypeError),
    ("top_k", 0, ValueError),
    ("max_tokens", -5, ValueError),
    ("lead_rows", -1, ValueError),
    ("experts_per_wave", True, TypeError),
])
def test_python_argument_errors_name_the_argument(field, value, error):
    kwargs = dict(GOOD, **{field: value})
    with pytest.raises(error, match=field):
        moe.can_implement(**kwargs)


@pytest.mark.parametrize("field, value", [
    ("hidden", 100),        # not a multiple of 128
    ("h_inter", 200),
    ("experts", 2048),      # above the kernel's 1024
    ("top_k", 9),           # more than the experts
    ("max_tokens", 1 << 23),  # tokens x top_k beyond 2^24
])
def test_library_configuration_errors_name_the_field(field, value):
    lib = _library_or_skip()
    reason, size = moe.can_implement(**dict(GOOD, **{field: value}))
    assert size == 0
    if not lib.xstage_has_cuda():
        assert "without CUDA" in reason
        return
    assert reason.startswith(field + ":"), reason


def test_library_workspace_size_without_gpu():
    lib = _library_or_skip()
    if not lib.xstage_has_cuda():
        pytest.skip("library built without CUDA")
    reason, size = moe.can_implement(**GOOD)
    if reason.startswith("device:"):  # no GPU here: the shape was accepted, the device check comes last
        return
    assert reason == ""
    assert size > GOOD["max_tokens"] * GOOD["top_k"] * GOOD["hidden"] * 2  # at least the combine rows


# --- the schedule "auto": the simulator's choice (CPU) ---------------------------------------------

AUTO = dict(hidden=2048, h_inter=1408, experts=16, top_k=2, tokens=8192, grid=132, lead_rows=4, experts_per_wave=4)


def test_predict_schedule_follows_the_tie_rule():
    _library_or_skip()
    seen = set()
    for ranks in (1, 2, 8):
        for tokens in (1, 512, 8192, 65536):
            for precision in ("bf16", "fp8"):
                order, speedup = moe.predict_schedule(**dict(AUTO, tokens=tokens, ranks=ranks, precision=precision))
                assert speedup > 0
                # interleaved unless expert waves are predicted faster by more than the 5 % band
                assert order == ("interleaved" if speedup >= 0.95 else "wave"), (ranks, tokens, precision, speedup)
                assert (order, speedup) == moe.predict_schedule(
                    **dict(AUTO, tokens=tokens, ranks=ranks, precision=precision)), "not deterministic"
                seen.add(round(speedup, 6))
    assert len(seen) > 1, "the prediction does not depend on tokens, ranks or precision"


@pytest.mark.parametrize("field, value, error", [
    ("hidden", 0, ValueError),
    ("tokens", -1, ValueError),
    ("grid", 131, ValueError),       # CTA pairs: even
    ("ranks", 3, ValueError),        # does not divide 16 experts
    ("lead_rows", 0, ValueError),
    ("experts_per_wave", 2.0, TypeError),
    ("precision", "int4", ValueError),
])
def test_predict_schedule_refuses_bad_input(field, value, error):
    _library_or_skip()
    with pytest.raises(error, match=field):
        moe.predict_schedule(**dict(AUTO, **{field: value}))


# --- torch (CPU tensors suffice: every error below is raised before any CUDA call) ---------------

@pytest.mark.parametrize("on_cuda", [False, True], ids=["cpu", "cuda"])
def test_torch_bad_weights_are_refused(on_cuda):
    """Each case has exactly one thing wrong with it. Checks run in the order tensor type, shape, dtype,
    device (_weight_dims), so on CPU tensors the dtype and shape cases are reported as such; on a CUDA
    device (valid apart from the one fault) every case but the device one is repeated."""
    torch = pytest.importorskip("torch")
    if on_cuda and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    device = "cuda" if on_cuda else "cpu"
    w1 = torch.zeros(8, 512, 384, dtype=torch.bfloat16, device=device)
    w2 = torch.zeros(8, 384, 256, dtype=torch.bfloat16, device=device)
    if not on_cuda:
        with pytest.raises(ValueError, match="w1 is on cpu"):
            xstage.moe.FusedMoE(w1, w2, top_k=2)
    with pytest.raises(ValueError, match="w2 has shape"):
        xstage.moe.FusedMoE(w1, w2[:, :, :128], top_k=2)
    with pytest.raises(ValueError, match="w1 has shape"):
        xstage.moe.FusedMoE(w1[0], w2, top_k=2)
    with pytest.raises(TypeError, match="w1 has dtype"):
        xstage.moe.FusedMoE(w1.float(), w2.float(), top_k=2)
    with pytest.raises(TypeError, match="w2 has dtype"):
        xstage.moe.FusedMoE(w1, w2.half(), top_k=2)
    with pytest.raises(TypeError, match="w1 is a"):
        xstage.moe.FusedMoE([1, 2], w2, top_k=2)
    with pytest.raises(ValueError, match="w2 has shape"):
        xstage.moe.fused_moe(torch.zeros(4, 384, dtype=torch.bfloat16, device=device),
                             torch.zeros(4, 2, dtype=torch.int32, device=device), torch.zeros(4, 2, device=device),
                             w1, w2[:1])


def test_torch_quantize_refuses_bad_input():
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match="w has dtype"):
        xstage.moe.quantize_fp8_blocks(torch.zeros(128, 128))
    with pytest.raises(ValueError, match="w is on cpu"):
        xstage.moe.quantize_fp8_blocks(torch.zeros(128, 128, dtype=torch.bfloat16))
    with pytest.raises(TypeError, match="w is a"):
        xstage.moe.quantize_fp8_blocks("weights")


def test_routing_checks_name_the_argument():
    # The per-call checks run before any launch; CPU tensors stop at the device check, after the dtypes.
    torch = pytest.importorskip("torch")
    from xstage import _torch_moe
    x = torch.zeros(5, 384, dtype=torch.bfloat16)
    ids = torch.zeros(5, 3, dtype=torch.int32)
    wts = torch.zeros(5, 3)
    check = _torch_moe._check_routing
    with pytest.raises(TypeError, match="x has dtype"):
        check(x.float(), ids, wts, 384, 3, 700, 0, "t")
    with pytest.raises(TypeError, match="topk_ids has dtype"):
        check(x, ids.float(), wts, 384, 3, 700, 0, "t")
    with pytest.raises(TypeError, match="topk_weights has dtype"):
        check(x, ids, ids, 384, 3, 700, 0, "t")
    with pytest.raises(TypeError, match="topk_ids is a"):
        check(x, None, wts, 384, 3, 700, 0, "t")
    with pytest.raises(ValueError, match="x is on cpu"):
        check(x, ids, wts, 384, 3, 700, 0, "t")
