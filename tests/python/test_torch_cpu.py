"""The PyTorch layer on a machine without a GPU: the custom op and its fake kernel, the SDPA implementation
registered with torch (registration, activation, fall-through, the served path's layout with a CPU stand-in for the
kernel), and xstage.attention's drop-in arguments and refusals."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import xstage  # noqa: E402

HAS_REGISTRY = hasattr(torch.nn.attention, "register_flash_attention_impl")
needs_registry = pytest.mark.skipif(not HAS_REGISTRY, reason=f"torch {torch.__version__} has no SDPA impl registry")


def _library_or_skip():
    try:
        return xstage.attention
    except xstage.XstageLoadError as e:  # the package's native library is not built here
        pytest.skip(str(e))


# --- custom op and fake kernel ------------------------------------------------------------------------------
def _fake_cuda():
    from torch._subclasses.fake_tensor import FakeTensorMode
    mode = FakeTensorMode()
    try:
        with mode:
            torch.empty(1, device="cuda")
    except Exception as e:  # a torch built without CUDA
        pytest.skip(f"fake CUDA tensors unavailable: {e}")
    return mode


def test_custom_op_is_registered_with_a_fake_kernel():
    _library_or_skip()
    assert "xstage::attention" in str(torch.ops.xstage.attention.default._schema)
    with _fake_cuda():
        q = torch.empty(2, 128, 4, 64, dtype=torch.bfloat16, device="cuda")
        out, lse = torch.ops.xstage.attention(q, q, q, 0.0, True, "bf16")
        assert out.shape == q.shape and out.dtype == torch.bfloat16
        assert lse.shape == (2, 4, 128) and lse.dtype == torch.float32
        q96 = torch.empty(2, 128, 4, 96, dtype=torch.bfloat16, device="cuda")
        with pytest.raises(ValueError, match="head_dim"):   # the library's checks run at trace time
            torch.ops.xstage.attention(q96, q96, q96, 0.0, False, "bf16")


def test_fake_kernel_refuses_meta_tensors_by_name():
    _library_or_skip()
    q = torch.empty(2, 128, 4, 64, dtype=torch.bfloat16, device="meta")
    with pytest.raises(ValueError, match="xstage.attention: q is a meta tensor"):
        torch.ops.xstage.attention(q, q, q, 0.0, False, "bf16")


def test_torch_compile_traces_the_op_without_graph_break():
    """fullgraph=True: a graph break would raise. The graph holds one xstage::attention call, in SDPA's layout."""
    _library_or_skip()
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(q, k, v):
        return xstage.attention(q, k, v, layout="bhsd", scale=0.125) * 2

    with _fake_cuda():
        q = torch.empty(1, 4, 128, 64, dtype=torch.bfloat16, device="cuda")
        graph = make_fx(f)(q, q.clone(), q.clone())
        out = torch.compile(f, backend="eager", fullgraph=True)(q, q, q)
        assert out.shape == (1, 4, 128, 64)
    calls = [n for n in graph.graph.nodes if n.op == "call_function" and "xstage.attention" in str(n.target)]
    assert len(calls) == 1 and calls[0].args[3:5] == (0.125, False)


# --- SDPA implementation registry ----------------------------------------------------------------------------
@needs_registry
def test_import_registers_xstage_and_does_not_activate_it():
    from torch.nn import attention
    assert "xstage" in attention.list_flash_attention_impls()
    assert attention.current_flash_attention_impl() is None


@needs_registry
@pytest.mark.parametrize("order", ["xstage first", "torch first"])
def test_registration_in_either_import_order(order):
    imports = "import xstage, torch" if order == "xstage first" else "import torch, xstage"
    code = (f"{imports}\nfrom torch.nn import attention\n"
            "print('xstage' in attention.list_flash_attention_impls(), attention.current_flash_attention_impl())")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "None"]


def test_import_xstage_does_not_import_torch():
    code = "import sys, xstage\nprint('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


@needs_registry
def test_activate_and_restore_leave_cpu_sdpa_unchanged():
    from torch.nn import attention
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 16, 64, generator=g) for _ in range(3))
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    attention.activate_flash_attention_impl("xstage")
    try:
        assert attention.current_flash_attention_impl() == "xstage"
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    finally:
        attention.restore_flash_attention_impl()
    assert attention.current_flash_attention_impl() is None
    assert torch.equal(out, ref)
    attention.activate_flash_attention_impl("xstage")   # twice in a row: the first is removed by torch
    attention.activate_flash_attention_impl("xstage")
    attention.restore_flash_attention_impl()


@needs_registry
def test_activation_puts_the_flash_backend_first_and_restore_puts_the_order_back():
    # PyTorch orders cuDNN first on sm_90/sm_100; activating must still reach the flash op, and restoring must leave
    # the user's order as it was, also after activating twice in a row.
    from torch.nn import attention
    B = attention.SDPBackend
    before = torch._C._get_sdp_priority_order()
    cudnn_first = [int(B.CUDNN_ATTENTION), int(B.FLASH_ATTENTION), int(B.EFFICIENT_ATTENTION), int(B.MATH),
                   int(B.OVERRIDEABLE)]
    torch._C._set_sdp_priority_order(cudnn_first)
    try:
        attention.activate_flash_attention_impl("xstage")
        assert list(torch._C._get_sdp_priority_order()) == [int(B.FLASH_ATTENTION), int(B.CUDNN_ATTENTION),
                                                          int(B.EFFICIENT_ATTENTION), int(B.MATH), int(B.OVERRIDEABLE)]
        attention.activate_flash_attention_impl("xstage")
        assert list(torch._C._get_sdp_priority_order())[0] == int(B.FLASH_ATTENTION)
        attention.restore_flash_attention_impl()
        assert list(torch._C._get_sdp_priority_order()) == cudnn_first
    finally:
        if attention.current_flash_attention_impl() is not None:
            attention.restore_flash_attention_impl()
        torch._C._set_sdp_priority_order(list(before))


def _bf16(*shape):
    return torch.randn(*shape, dtype=torch.bfloat16)


@pytest.mark.parametrize("kwargs, words", [
    (dict(dropout_p=0.1), "dropout_p=0.1"),
    (dict(is_causal=True), "is_causal=True"),
    (dict(return_debug_mask=True), "return_debug_mask=True"),
    (dict(scale=-1.0), "scale=-1.0"),
    (dict(query=torch.randn(1, 2, 8, 64)), "query.dtype=torch.float32"),
    (dict(query=_bf16(1, 2, 8, 96), key=_bf16(1, 2, 8, 96), value=_bf16(1, 2, 8, 96)), "head_dim=96"),
    (dict(key=_bf16(1, 1, 8, 64), value=_bf16(1, 1, 8, 64)), "shapes"),
    (dict(query=_bf16(1, 2, 8, 64).requires_grad_()), "requires_grad=True"),
    (dict(), "device=cpu"),
])
def test_sdpa_refusal_names_the_argument(kwargs, words):
    from xstage import _torch_sdpa
    call = dict(query=_bf16(1, 2, 8, 64), key=_bf16(1, 2, 12, 64), value=_bf16(1, 2, 12, 64))
    call.update(kwargs)
    reason = _torch_sdpa.refusal(**call)
    assert reason is not None and words in reason


class _Original:
    def __init__(self):
        self.calls = []

    def call_boxed(self, keyset, *args, **kwargs):
        self.calls.append((args, kwargs))
        return "pytorch"


def test_sdpa_kernel_passes_unsupported_calls_on_unchanged():
    from xstage import _torch_sdpa
    original = _Original()
    kernel = _torch_sdpa.make_kernel(original)
    q = _bf16(1, 2, 8, 64)
    before = _torch_sdpa.counts()["passed"]
    assert kernel("KEYSET", q, q, q, 0.0, True, False, scale=0.5) == "pytorch"   # causal
    assert kernel("KEYSET", q, q, q) == "pytorch"                               # CPU tensors
    args, kwargs = original.calls[0]
    assert args[0] is q and args[3:] == (0.0, True, False) and kwargs == {"scale": 0.5}
    assert _torch_sdpa.counts()["passed"] == before + 2


def test_sdpa_kernel_serves_supported_calls_in_sdpa_layout():
    """The served path with a CPU stand-in for the kernel: [B, H, S, D] in, [B, H, S, D] out, lse [B, H, S],
    equal to PyTorch's math attention."""
    from xstage import _torch_sdpa

    def stand_in(query, key, value, scale):   # the kernel's contract: [B, S, H, D] in, lse [B, H, S]
        q, k, v = (t.transpose(1, 2) for t in (query, key, value))   # as _torch_sdpa.serve hands them over
        s = torch.einsum("bqhd,bkhd->bhqk", q.float(), k.float()) * (scale or q.shape[-1] ** -0.5)
        out = torch.einsum("bhqk,bkhd->bqhd", s.softmax(-1), v.float()).to(q.dtype)
        return out.transpose(1, 2), s.logsumexp(-1)

    original = _Original()
    kernel = _torch_sdpa.make_kernel(original, serve_fn=stand_in, refusal_fn=lambda *a: None)
    g = torch.Generator().manual_seed(3)
    q = torch.randn(2, 3, 10, 64, generator=g).bfloat16()
    k = torch.randn(2, 3, 7, 64, generator=g).bfloat16()
    v = torch.randn(2, 3, 7, 64, generator=g).bfloat16()
    out, lse, _, _, max_q, max_k, rng, offset, debug = kernel("KEYSET", q, k, v, scale=0.2)
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), scale=0.2)
    assert original.calls == [] and out.shape == q.shape and lse.shape == (2, 3, 10)
    torch.testing.assert_close(out.float(), ref, rtol=2e-2, atol=2e-2)
    assert (max_q, max_k) == (10, 7) and rng.dtype == torch.uint64 and debug.numel() == 0


# --- xstage.attention's drop-in arguments ----------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, exc, words", [
    (dict(causal=True), ValueError, "xstage.attention: causal=True; accepted: False"),
    (dict(is_causal=True), ValueError, "xstage.attention: is_causal=True; accepted: False"),
    (dict(causal="yes"), TypeError, "causal is a str"),
    (dict(dropout_p=0.1), ValueError, "xstage.attention: dropout_p=0.1; accepted: 0.0"),
    (dict(dropout_p="0"), TypeError, "dropout_p is a str"),
    (dict(scale=0.5, softmax_scale=0.25), ValueError, "softmax_scale=0.25 and scale=0.5 differ"),
    (dict(scale=-1.0), ValueError, "softmax_scale -1.0; accepted: a positive finite number"),
    (dict(layout="sbhd"), ValueError, "layout 'sbhd'; accepted: 'bshd'"),
    (dict(layout=1), TypeError, "layout is a int"),
])
def test_attention_refuses_what_the_kernel_does_not_do(kwargs, exc, words):
    fn = _library_or_skip()
    q = torch.zeros(1, 8, 2, 64, dtype=torch.bfloat16)
    with pytest.raises(exc, match=words.replace("(", r"\(").replace(")", r"\)")):
        fn(q, q, q, **kwargs)


def test_attention_refuses_inputs_that_require_grad():
    fn = _library_or_skip()
    q = torch.zeros(1, 8, 2, 64, dtype=torch.bfloat16, requires_grad=True)
    k = torch.zeros(1, 8, 2, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"q.requires_grad=True .*torch.no_grad\(\)"):
        fn(q, k, k)
    with torch.no_grad(), pytest.raises(ValueError, match="device cpu"):   # past the grad check: the device check
        fn(q, k, k)


def test_attention_refuses_meta_tensors_by_name():
    fn = _library_or_skip()
    q = torch.empty(1, 8, 2, 64, dtype=torch.bfloat16, device="meta")
    with pytest.raises(ValueError, match="xstage.attention: q is a meta tensor"):
        fn(q, q, q)


@pytest.mark.parametrize("kwargs", [dict(causal=False, is_causal=False, dropout_p=0.0), dict(scale=0.125),
                                    dict(scale=0.125, softmax_scale=0.125), dict(layout="bshd"),
                                    dict(dropout_p=0), dict(softmax_scale=__import__("fractions").Fraction(1, 8))])
def test_attention_accepts_no_op_values(kwargs):
    """No-op values pass the argument checks and reach the kernel's own checks (CPU tensors: refused there)."""
    fn = _library_or_skip()
    q = torch.zeros(1, 8, 2, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="device cpu"):
        fn(q, q, q, **kwargs)


def test_attention_bhsd_layout_checks_the_rank():
    fn = _library_or_skip()
    q = torch.zeros(8, 2, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"q: rank 3 .*layout='bhsd'"):
        fn(q, q, q, layout="bhsd")


def test_attention_bhsd_layout_through_the_fake_kernel():
    """layout="bhsd" under FakeTensorMode (the torch.compile path): shapes come back in [B, H, S, D]."""
    fn = _library_or_skip()
    with _fake_cuda():
        q = torch.empty(2, 4, 128, 64, dtype=torch.bfloat16, device="cuda")
        k = torch.empty(2, 4, 256, 64, dtype=torch.bfloat16, device="cuda")
        out, lse = fn(q, k, k, layout="bhsd", return_lse=True, scale=1 / math.sqrt(64))
        assert out.shape == (2, 4, 128, 64) and lse.shape == (2, 4, 128)


def test_numpy_scale_is_accepted():
    np = pytest.importorskip("numpy")
    fn = _library_or_skip()
    q = torch.zeros(1, 8, 2, 64, dtype=torch.bfloat16)
    for value in (np.float64(0.125), np.float32(0.125)):
        with pytest.raises(ValueError, match="device cpu"):
            fn(q, q, q, softmax_scale=value)


def test_help_and_dir_without_torch():
    code = ("import sys; sys.modules['torch'] = None\nimport xstage, pydoc\n"
            "print('attention' in dir(xstage), 'FusedMoE' in dir(xstage))\n"
            "print(pydoc.render_doc(xstage.attention))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "True True"
    assert "layout=" in result.stdout and "FlashAttention forward" in result.stdout and "dropout_p" in result.stdout
