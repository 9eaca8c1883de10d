"""The FP8 acceptance rule of tests/python/moe_reference.py on CPU tensors: the reference passes against itself and
against itself with its Linear-1 outputs perturbed slightly; planted errors fail it (a swapped pair of experts, the
bf16 layer's output, 64-channel activation groups where the kernel uses 128)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import moe_reference as mr  # noqa: E402

EXPERTS, TOP_K, HIDDEN, INTER = 8, 3, 384, 256


def inputs(tokens, seed):
    g = torch.Generator().manual_seed(seed)
    w1 = (torch.randn(EXPERTS, 2 * INTER, HIDDEN, generator=g) * 0.06).bfloat16()
    w2 = (torch.randn(EXPERTS, HIDDEN, INTER, generator=g) * 0.06).bfloat16()
    x = torch.randn(tokens, HIDDEN, generator=g).bfloat16()
    ids = torch.rand(tokens, EXPERTS, generator=g).argsort(dim=1)[:, :TOP_K].to(torch.int32)
    wts = torch.softmax(torch.randn(tokens, TOP_K, generator=g), dim=1)
    return x, ids, wts, w1, w2


@pytest.mark.parametrize("tokens", [1, 97])
def test_rule_accepts_the_reference_and_rejects_planted_errors(tokens):
    x, ids, wts, w1, w2 = inputs(tokens, seed=tokens)
    (q1, s1), (q2, s2) = mr.quant_blocks(w1), mr.quant_blocks(w2)
    y, bound = mr.fp8_reference(x, ids, wts, q1, s1, q2, s2)
    assert bound.shape == (tokens,) and bool((bound > 0).all())
    assert mr.fp8_failure(y, y, bound) == ""
    # Another accumulation order (tests/cpu/test_moe_fp8_check.cpp: 2^-12 reproduces the GPU's spread)
    for seed in range(3):
        jittered, _ = mr.fp8_reference(x, ids, wts, q1, s1, q2, s2, l1_jitter=2**-12, seed=seed)
        assert not torch.equal(jittered, y)
        assert mr.fp8_failure(jittered, y, bound) == "", mr.check_within_flips(jittered, y, bound)
    r1, r2 = mr.dequant_blocks(q1, s1), mr.dequant_blocks(q2, s2)
    a = int(ids[0, wts[0].argmax()])
    b = next(e for e in range(EXPERTS) if e not in ids[0].tolist())
    swapped, _ = mr.reference(x, ids, wts, mr.with_experts_swapped(r1, a, b), mr.with_experts_swapped(r2, a, b), True)
    assert "tokens over" in mr.fp8_failure(y, swapped, bound)
    bf16, _ = mr.reference(x, ids, wts, w1.float(), w2.float())
    if tokens >= mr.P75_MIN_ROWS:   # the unquantized layer: every row off by the quantization error
        assert mr.fp8_failure(bf16, y, bound) != ""


def test_rule_rejects_a_different_activation_group():
    x, ids, wts, w1, w2 = inputs(200, seed=5)
    (q1, s1), (q2, s2) = mr.quant_blocks(w1), mr.quant_blocks(w2)
    y, bound = mr.fp8_reference(x, ids, wts, q1, s1, q2, s2)
    r1, r2 = mr.dequant_blocks(q1, s1), mr.dequant_blocks(q2, s2)
    y64, _ = mr.reference(x, ids, wts, r1, r2, True, act_group=64)   # weight blocks stay 128 x 128
    assert not torch.equal(y64, y)
    assert mr.fp8_failure(y64, y, bound) != ""
