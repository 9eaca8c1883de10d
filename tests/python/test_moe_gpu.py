"""xstage.FusedMoE on a GPU against a plain PyTorch reference layer (float32 math on the same bf16
inputs, rounded where the kernel rounds: gate, up, the SwiGLU product and each expert's output to bf16,
the top-k sum in float32 in routing order). FP8 against the same reference with the kernel's
quantization (activations per token per 128 channels, the weights' 128 x 128 block scales). Skipped
without CUDA (or a GPU the kernel is not built for)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA device", allow_module_level=True)
if torch.cuda.get_device_capability(0) != (9, 0):
    pytest.skip("the fused MoE kernel is built for sm_90a (H100/H200)", allow_module_level=True)

import torch.nn.functional as F  # noqa: E402

import xstage  # noqa: E402
from xstage import _torch_moe  # noqa: E402

HIDDEN, INTER, EXPERTS, TOP_K, MAX_TOKENS = 384, 256, 8, 3, 700  # three Linear-2 N-tiles (odd)
E4M3_MAX = 448.0
DEV = torch.device("cuda", 0)


def make_weights(seed, experts=EXPERTS, hidden=HIDDEN, inter=INTER):
    g = torch.Generator(device=DEV).manual_seed(seed)
    w1 = (torch.randn(experts, 2 * inter, hidden, device=DEV, generator=g) * 0.06).bfloat16()
    w2 = (torch.randn(experts, hidden, inter, device=DEV, generator=g) * 0.06).bfloat16()
    return w1, w2


def make_call(tokens, seed, experts=EXPERTS, top_k=TOP_K, hidden=HIDDEN):
    g = torch.Generator(device=DEV).manual_seed(seed)
    x = torch.randn(tokens, hidden, device=DEV, generator=g).bfloat16()
    ids = torch.rand(tokens, experts, device=DEV, generator=g).argsort(dim=1)[:, :top_k].to(torch.int32)
    wts = torch.softmax(torch.randn(tokens, top_k, device=DEV, generator=g), dim=1)
    return x, ids, wts


def dequant_blocks(q, scales):
    """e4m3 weights [E, R, C] and block scales [E, R/128, C/128] -> float32."""
    s = scales.repeat_interleave(128, dim=1).repeat_interleave(128, dim=2)
    return q.float() * s


def quant_rows(a, group=128):
    """The kernel's activation rule: per row per `group` channels, scale = amax / 448, q = e4m3(a * (1/scale))."""
    t, c = a.shape
    g = a.float().reshape(t, c // group, group)
    amax = g.abs().amax(dim=2, keepdim=True)
    scale = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax))
    q = (g * (1.0 / scale)).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return (q.float() * scale).reshape(t, c)


def reference(x, ids, wts, w1, w2, fp8=False):
    """The layer in float32 on the same inputs (w1, w2 float32: the bf16 or the dequantized fp8 weights)."""
    tokens, hidden = x.shape
    inter = w2.shape[2]
    xf = quant_rows(x) if fp8 else x.float()
    out = torch.zeros(tokens, ids.shape[1], hidden, device=x.device)
    for e in range(w1.shape[0]):
        t, j = (ids == e).nonzero(as_tuple=True)
        if t.numel() == 0:
            continue
        h = xf[t] @ w1[e].T
        gate, up = h[:, :inter].bfloat16().float(), h[:, inter:].bfloat16().float()
        a = (F.silu(gate) * up).bfloat16().float()
        if fp8:
            a = quant_rows(a)
        out[t, j] = (a @ w2[e].T).bfloat16().float()
    y = torch.zeros(tokens, hidden, device=x.device)
    for j in range(ids.shape[1]):
        y += wts[:, j:j + 1] * out[:, j]
    return y.bfloat16()


def rel_l2(got, want):
    return ((got.float() - want.float()).norm() / want.float().norm()).item()


def expect_close(got, want, fp8, what):
    """bf16: relative L2 error below 1e-2. FP8 (reference with the kernel's quantization): the Tensor Cores'
    accumulation moves some values across a bf16 / e4m3 rounding boundary, so the whole-output error is
    allowed 2e-2 and the 75th percentile of the rows' relative errors 1e-2 (the C++ tests' rule on rows)."""
    assert torch.isfinite(got.float()).all(), f"{what}: non-finite output"
    err = rel_l2(got, want)
    if not fp8:
        assert err < 1e-2, f"{what}: relative L2 error {err:.3e}"
        return
    rows = (got.float() - want.float()).norm(dim=1) / want.float().norm(dim=1).clamp_min(1e-30)
    p75 = rows.quantile(0.75).item()
    assert err < 2e-2 and p75 < 1e-2, f"{what}: relative L2 error {err:.3e}, row p75 {p75:.3e}"


def build(precision, schedule, seed=1):
    w1, w2 = make_weights(seed)
    layer = xstage.FusedMoE.from_bf16(w1, w2, top_k=TOP_K, precision=precision, schedule=schedule,
                                      max_tokens=MAX_TOKENS)
    if precision == "fp8":
        ref_w1, ref_w2 = dequant_blocks(layer.w1, layer.w1_scale), dequant_blocks(layer.w2, layer.w2_scale)
    else:
        ref_w1, ref_w2 = w1.float(), w2.float()
    return layer, (w1, w2), (ref_w1, ref_w2)


@pytest.mark.parametrize("precision", ["bf16", "fp8"])
@pytest.mark.parametrize("schedule", ["interleaved", "wave"])
def test_matches_torch_reference(precision, schedule):
    layer, _, (r1, r2) = build(precision, schedule)
    fp8 = precision == "fp8"
    for i, tokens in enumerate([MAX_TOKENS, 1, 97, 300, MAX_TOKENS]):
        x, ids, wts = make_call(tokens, seed=100 + i)
        y = layer(x, ids, wts)
        assert y.shape == x.shape and y.dtype == torch.bfloat16
        expect_close(y, reference(x, ids, wts, r1, r2, fp8), fp8, f"{precision} {schedule} T={tokens}")
        again = layer(x, ids.long(), wts)  # int64 ids are converted; the same bits
        assert torch.equal(again, y), f"T={tokens}: a repeated call differs"
    if fp8:  # quantized indeed: not the bf16 layer's output
        w1, w2 = make_weights(1)
        x, ids, wts = make_call(MAX_TOKENS, seed=7)
        assert rel_l2(layer(x, ids, wts), reference(x, ids, wts, w1.float(), w2.float())) > 1e-4
    assert layer.last_failure() == ""
    assert layer.info()["runs"] == 10 + (1 if fp8 else 0)


def test_quantize_matches_the_rule():
    w1, _ = make_weights(3)
    q, s = xstage.quantize_fp8_blocks(w1)
    assert q.dtype == torch.float8_e4m3fn and q.shape == w1.shape
    assert s.shape == (EXPERTS, 2 * INTER // 128, HIDDEN // 128)
    blocks = w1.float().reshape(EXPERTS, 2 * INTER // 128, 128, HIDDEN // 128, 128)
    amax = blocks.abs().amax(dim=(2, 4)).double()
    # In double, then rounded: the correctly rounded float quotients the kernel's IEEE divisions give
    # (torch divides by a scalar through its reciprocal, which can differ in the last bit).
    want_s = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax)).float()
    assert torch.equal(s, want_s)
    inv = (1.0 / want_s.double()).float().repeat_interleave(128, dim=1).repeat_interleave(128, dim=2)
    want_q = (w1.float() * inv).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    assert torch.equal(q.view(torch.uint8), want_q.view(torch.uint8))


def test_functional_form_and_streams():
    layer, (w1, w2), _ = build("bf16", "interleaved")
    x, ids, wts = make_call(257, seed=11)
    want = layer(x, ids, wts)
    assert torch.equal(xstage.fused_moe(x, ids, wts, w1, w2), want)
    q1, s1 = xstage.quantize_fp8_blocks(w1)
    q2, s2 = xstage.quantize_fp8_blocks(w2)
    y8 = xstage.fused_moe(x, ids, wts, q1, q2, w1_scale=s1, w2_scale=s2)
    expect_close(y8, reference(x, ids, wts, dequant_blocks(q1, s1), dequant_blocks(q2, s2), fp8=True), True, "fp8")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y = layer(x.view(1, 257, HIDDEN), ids, wts)  # leading dims are flattened
    side.synchronize()
    assert y.shape == (1, 257, HIDDEN) and torch.equal(y.view(257, HIDDEN), want)


def test_custom_op_and_compile():
    layer, _, _ = build("bf16", "wave")
    x, ids, wts = make_call(128, seed=5)
    want = layer(x, ids, wts)
    op = _torch_moe.fused_moe_op
    args = (x, ids, wts, layer.w1, layer.w2, None, None, layer._layer_id)
    torch.library.opcheck(op, args, test_utils=("test_schema", "test_faketensor"))
    assert torch.equal(op(*args), want)
    compiled = torch.compile(layer, fullgraph=True)
    assert torch.equal(compiled(x, ids, wts), want)


def test_bad_calls_raise_before_any_launch():
    layer, (w1, w2), _ = build("bf16", "interleaved")
    runs = layer.info()["runs"]
    x, ids, wts = make_call(MAX_TOKENS + 1, seed=2)
    with pytest.raises(ValueError, match="max_tokens"):
        layer(x, ids, wts)
    x, ids, wts = make_call(10, seed=2)
    with pytest.raises(ValueError, match="topk_ids has shape"):
        layer(x, ids[:, :2], wts)
    with pytest.raises(ValueError, match="topk_weights has shape"):
        layer(x, ids, wts[:5])
    with pytest.raises(ValueError, match="x has shape"):
        layer(x[:, :128], ids, wts)
    with pytest.raises(TypeError, match="x has dtype"):
        layer(x.half(), ids, wts)
    with pytest.raises(ValueError, match="x is on cpu"):
        layer(x.cpu(), ids, wts)
    assert layer.info()["runs"] == runs, "a refused call launched"
    (q1, _), (q2, _) = xstage.quantize_fp8_blocks(w1), xstage.quantize_fp8_blocks(w2)
    with pytest.raises(ValueError, match="w1_scale"):
        xstage.FusedMoE(q1, q2, top_k=TOP_K)
    with pytest.raises(ValueError, match="hidden"):
        xstage.FusedMoE(w1[:, :, :100].contiguous(), w2[:, :100].contiguous(), top_k=TOP_K)
    with pytest.raises(ValueError, match="top_k"):
        xstage.FusedMoE(w1, w2, top_k=EXPERTS + 1)
    # Growing explicitly: reserve() makes room for more tokens.
    layer.reserve(2 * MAX_TOKENS)
    x, ids, wts = make_call(MAX_TOKENS + 1, seed=2)
    expect_close(layer(x, ids, wts), reference(x, ids, wts, w1.float(), w2.float()), False, "after reserve")
