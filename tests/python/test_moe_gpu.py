"""xstage.FusedMoE on a GPU against the PyTorch reference layer of tests/python/moe_reference.py (float32 math on
the same bf16 inputs, rounded where the kernel rounds; FP8 with the kernel's quantization, checked by the C++
tests' FP8 rule, check_within_flips). Skipped without CUDA (or a GPU the kernel is not built for)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA device", allow_module_level=True)
if torch.cuda.get_device_capability(0) != (9, 0):
    pytest.skip("the fused MoE kernel is built for sm_90a (H100/H200)", allow_module_level=True)

import xstage  # noqa: E402
from moe_reference import (dequant_blocks, fp8_failure, fp8_reference, quant_blocks, reference,  # noqa: E402
                           with_experts_swapped)
from xstage import _torch_moe  # noqa: E402

HIDDEN, INTER, EXPERTS, TOP_K, MAX_TOKENS = 384, 256, 8, 3, 700  # three Linear-2 N-tiles (odd)
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


def rel_l2(got, want):
    return ((got.float() - want.float()).norm() / want.float().norm()).item()


def expect_close(got, want, what):
    """want: (y, flip_bound) from moe_reference. bf16 (flip_bound None): relative L2 error below 1e-2. FP8: the
    C++ tests' rule (moe_reference.fp8_failure)."""
    y, bound = want
    assert torch.isfinite(got.float()).all(), f"{what}: non-finite output"
    if bound is None:
        err = rel_l2(got, y)
        assert err < 1e-2, f"{what}: relative L2 error {err:.3e}"
        return
    why = fp8_failure(got, y, bound)
    assert why == "", f"{what}: {why} (whole-output relative L2 error {rel_l2(got, y):.3e})"


def expect_wrong_expert_fails(got, x, ids, wts, r1, r2, fp8, what):
    """The rule must reject the output against a reference with token 0's heaviest expert exchanged for one
    it does not use (a kernel reading the wrong expert's weights)."""
    a = int(ids[0, wts[0].argmax()])
    b = next(e for e in range(EXPERTS) if e not in ids[0].tolist())
    y, bound = reference(x, ids, wts, with_experts_swapped(r1, a, b), with_experts_swapped(r2, a, b), fp8)
    if fp8:
        assert fp8_failure(got, y, bound) != "", f"{what}: the FP8 rule accepts a swapped expert"
    else:
        assert rel_l2(got, y) > 1e-2, f"{what}: the bf16 rule accepts a swapped expert"


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
@pytest.mark.parametrize("schedule", ["auto", "interleaved", "wave"])
def test_matches_torch_reference(precision, schedule):
    layer, _, (r1, r2) = build(precision, schedule)
    fp8 = precision == "fp8"
    for i, tokens in enumerate([MAX_TOKENS, 1, 97, 300, MAX_TOKENS]):
        x, ids, wts = make_call(tokens, seed=100 + i)
        y = layer(x, ids, wts)
        assert y.shape == x.shape and y.dtype == torch.bfloat16
        expect_close(y, reference(x, ids, wts, r1, r2, fp8), f"{precision} {schedule} T={tokens}")
        expect_wrong_expert_fails(y, x, ids, wts, r1, r2, fp8, f"{precision} {schedule} T={tokens}")
        again = layer(x, ids.long(), wts)  # int64 ids are converted; the same bits
        assert torch.equal(again, y), f"T={tokens}: a repeated call differs"
    if fp8:  # quantized indeed: not the bf16 layer's output
        w1, w2 = make_weights(1)
        x, ids, wts = make_call(MAX_TOKENS, seed=7)
        assert rel_l2(layer(x, ids, wts), reference(x, ids, wts, w1.float(), w2.float())[0]) > 1e-4
    assert layer.last_failure() == ""
    info = layer.info()
    assert info["runs"] == 10 + (1 if fp8 else 0)
    if schedule == "auto":  # the last run's order is the prediction for its token count
        want, _ = xstage.moe.predict_schedule(hidden=HIDDEN, h_inter=INTER, experts=EXPERTS, top_k=TOP_K,
                                              tokens=MAX_TOKENS, grid=info["grid"], lead_rows=layer._layer._auto["lead_rows"],
                                              experts_per_wave=layer._layer._auto["experts_per_wave"],
                                              precision=precision)
        assert info["schedule"] == "auto" and info["order"] == want
    else:
        assert info["order"] == schedule


def test_quantize_matches_the_rule():
    w1, _ = make_weights(3)
    q, s = xstage.quantize_fp8_blocks(w1)
    assert q.dtype == torch.float8_e4m3fn and q.shape == w1.shape
    assert s.shape == (EXPERTS, 2 * INTER // 128, HIDDEN // 128)
    want_q, want_s = quant_blocks(w1)
    assert torch.equal(s, want_s)
    assert torch.equal(q.view(torch.uint8), want_q.view(torch.uint8))


def test_functional_form_and_streams():
    layer, (w1, w2), _ = build("bf16", "interleaved")
    x, ids, wts = make_call(257, seed=11)
    want = layer(x, ids, wts)
    assert torch.equal(xstage.fused_moe(x, ids, wts, w1, w2), want)
    q1, s1 = xstage.quantize_fp8_blocks(w1)
    q2, s2 = xstage.quantize_fp8_blocks(w2)
    y8 = xstage.fused_moe(x, ids, wts, q1, q2, w1_scale=s1, w2_scale=s2)
    expect_close(y8, fp8_reference(x, ids, wts, q1, s1, q2, s2), "fp8")
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
    expect_close(layer(x, ids, wts), reference(x, ids, wts, w1.float(), w2.float()), "after reserve")
