"""The fused MoE layer in PyTorch (float32 math on the same bf16 inputs, rounded where the kernel rounds) and the
FP8 acceptance rule of the C++ tests, for tests/python/test_moe_gpu.py. Device-agnostic (runs on CPU tensors).

Reference: gate, up, the SwiGLU product and each expert's output rounded to bf16, the top-k sum in float32 in
routing order. FP8: activations quantized per token per 128 channels (Linear-1 input and Linear-2 input) as the
kernel does (scale = amax / 448 and its reciprocal as correctly rounded float quotients, q = e4m3(a * (1/scale))),
the weights dequantized from their 128 x 128 block scales.

FP8 rule (check_within_flips, include/xstage/testing/moe_reference.hpp and src/testing/moe_reference.cpp;
tests/gpu/test_moe_fused.cpp): each token's row within FLIPS e4m3 steps of its most sensitive Linear-2 input
values plus REL of its norm, and the 75th percentile of the rows' relative errors below P75 (a wrong quantization
rule or a wrong expert moves many rows; a rounding flip, few).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

E4M3_MAX = 448.0
GROUP = 128          # activation and weight-block quantization group (kFp8GroupSize, kFusedFp8L2Group)
# Mirrors include/xstage/testing/moe_reference.hpp: kFp8CheckFlips = 4.0, kFp8CheckRel = 1e-2; the p75 bound is
# tests/gpu/test_moe_fused.cpp's expect_matches (and tests/cpu/test_moe_fp8_check.cpp's kP75).
FLIPS, REL, P75 = 4.0, 1e-2, 1e-2
# The p75 part is a statement about most of many rows; with fewer rows it would be a bound of REL on single
# rows, which the per-token part deliberately relaxes by the flips (one token, three experts).
P75_MIN_ROWS = 8    # kFp8CheckP75MinRows


def _e4m3_steps() -> torch.Tensor:
    """step[code]: the larger distance from e4m3 code (magnitude 0..0x7e) to its neighbours (e4m3_step)."""
    values = torch.arange(0x7f, dtype=torch.uint8).view(torch.float8_e4m3fn).double()
    below = torch.cat([torch.zeros(1, dtype=torch.float64), values[1:] - values[:-1]])
    above = torch.cat([values[1:] - values[:-1], torch.zeros(1, dtype=torch.float64)])
    return torch.maximum(below, above)   # 0x7e (448) has only the step below


_STEPS = _e4m3_steps()


def quant_rows(a, group=GROUP):
    """(codes as float32 values, scales [rows, groups]) of the kernel's activation rule."""
    t, c = a.shape
    g = a.float().reshape(t, c // group, group)
    amax = g.abs().amax(dim=2, keepdim=True).double()
    scale = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax)).float()   # IEEE quotient, then float
    inv = (1.0 / scale.double()).float()
    q = (g * inv).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return q, scale


def dequant_rows(q, scale):
    return (q.float() * scale).reshape(q.shape[0], -1)


def quant_blocks(w):
    """The weights' rule (quantize_fp8_blocks): 128 x 128 blocks of [E, R, C], scale = amax / 448 and its
    reciprocal as correctly rounded float quotients (in double, then float: what the kernel's IEEE divisions
    give; torch divides by a scalar through its reciprocal, which can differ in the last bit).
    Returns (e4m3 [E, R, C], scales float32 [E, R/128, C/128])."""
    e, r, c = w.shape
    blocks = w.float().reshape(e, r // GROUP, GROUP, c // GROUP, GROUP)
    amax = blocks.abs().amax(dim=(2, 4)).double()
    s = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax)).float()
    inv = (1.0 / s.double()).float().repeat_interleave(GROUP, dim=1).repeat_interleave(GROUP, dim=2)
    return (w.float() * inv).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn), s


def dequant_blocks(q, scales):
    """e4m3 weights [E, R, C] and block scales [E, R/128, C/128] -> float32."""
    s = scales.repeat_interleave(GROUP, dim=1).repeat_interleave(GROUP, dim=2)
    return q.float() * s


def reference(x, ids, wts, w1, w2, fp8=False, act_group=GROUP, l1_jitter=0.0, seed=0):
    """(y bf16 [T, hidden], flip_bound float64 [T] or None). w1, w2: float32, the bf16 weights or the
    dequantized fp8 ones (dequant_blocks). act_group: the activations' quantization group (the kernel's 128; other
    values only to plant an error). l1_jitter > 0 multiplies each Linear-1 output by 1 + l1_jitter * u (u uniform in
    [-1, 1) from `seed`) before its bf16 rounding: a stand-in for another accumulation (l1_jitter of
    moe_reference_layer_fp8). flip_bound[t] = sum_j |wts[t, j]| * max_c step(q_c) * s_c *
    ||W2_e[:, c]|| over token t's experts e (moe_reference_layer_fp8's flip_bound)."""
    tokens, hidden = x.shape
    inter = w2.shape[2]
    xf = dequant_rows(*quant_rows(x, act_group)) if fp8 else x.float()
    out = torch.zeros(tokens, ids.shape[1], hidden, device=x.device)
    flips = torch.zeros(tokens, ids.shape[1], dtype=torch.float64, device=x.device) if fp8 else None
    for e in range(w1.shape[0]):
        t, j = (ids == e).nonzero(as_tuple=True)
        if t.numel() == 0:
            continue
        h = xf[t] @ w1[e].T
        if l1_jitter > 0:
            g = torch.Generator(device=h.device).manual_seed(seed * 64 + e)
            h = h * (1 + l1_jitter * (2 * torch.rand(h.shape, generator=g, device=h.device) - 1))
        gate, up = h[:, :inter].bfloat16().float(), h[:, inter:].bfloat16().float()
        a = (F.silu(gate) * up).bfloat16().float()
        if fp8:
            q, s = quant_rows(a, act_group)
            a = dequant_rows(q, s)
            step = _STEPS.to(x.device)[q.view(torch.uint8).long() & 0x7f]        # [n, groups, 128]
            col_norm = w2[e].double().norm(dim=0).reshape(1, -1, act_group)          # ||W2[:, c]||
            flips[t, j] = (step * s.double() * col_norm).amax(dim=(1, 2))
        out[t, j] = (a @ w2[e].T).bfloat16().float()
    y = torch.zeros(tokens, hidden, device=x.device)
    for j in range(ids.shape[1]):
        y += wts[:, j:j + 1] * out[:, j]
    bound = (wts.double().abs() * flips).sum(dim=1) if fp8 else None
    return y.bfloat16(), bound


def fp8_reference(x, ids, wts, q1, s1, q2, s2, **kwargs):
    """The FP8 layer's reference from its e4m3 weights and block scales (FusedMoE's buffers or
    quantize_fp8_blocks' results): the one reference of the layer and the functional form."""
    return reference(x, ids, wts, dequant_blocks(q1, s1), dequant_blocks(q2, s2), fp8=True, **kwargs)


def check_within_flips(got, want, flip_bound, flips=FLIPS, rel=REL):
    """check_within_flips of src/testing/moe_reference.cpp: (tokens over their allowance, worst ratio, worst
    token, median and p75 of the rows' relative errors; the quantiles at index (n-1)//2 and (n-1)*3//4)."""
    g, r = got.double(), want.double()
    finite = torch.isfinite(g).all(dim=1)
    err = (g - r).norm(dim=1)
    norm = r.norm(dim=1)
    allowed = flips * flip_bound + rel * norm + 1e-30
    inf = torch.full_like(err, float("inf"))
    ratio = torch.where(finite, err / allowed, inf)
    rel_err = torch.where(finite, err / norm.clamp_min(1e-30), inf)
    over = int((~(ratio <= 1.0)).sum())
    worst = int(ratio.argmax())
    rows = rel_err.sort().values
    n = rows.numel()
    return dict(tokens_over=over, worst_ratio=float(ratio[worst]), worst_token=worst,
                median_rel_error=float(rows[(n - 1) // 2]), p75_rel_error=float(rows[(n - 1) * 3 // 4]))


def fp8_failure(got, want, flip_bound) -> str:
    """'' when `got` passes the FP8 rule against the reference (want, flip_bound), else why not."""
    if not torch.isfinite(got.float()).all():
        return "non-finite output"
    c = check_within_flips(got, want, flip_bound)
    tokens = got.shape[0]
    problems = []
    if c["tokens_over"]:
        problems.append(f"{c['tokens_over']} of {tokens} tokens over {FLIPS:g} e4m3 steps + {REL:g} of the row "
                        f"(worst token {c['worst_token']} at {c['worst_ratio']:.2f}x its allowance)")
    if tokens >= P75_MIN_ROWS and not c["p75_rel_error"] < P75:
        problems.append(f"row p75 relative error {c['p75_rel_error']:.3e} >= {P75:g}")
    if not problems:
        return ""
    return "; ".join(problems) + f" (row median {c['median_rel_error']:.3e}, p75 {c['p75_rel_error']:.3e})"


def with_experts_swapped(w, a, b):
    """w [E, ...] with experts a and b exchanged (a planted error the rule must catch)."""
    w = w.clone()
    w[[a, b]] = w[[b, a]]
    return w
