"""xstage's fused Ulysses attention in the shape of xDiT's (xfuser 0.7) hybrid sequence-parallel attention layer.

xfuser's attention processors hold an `xFuserLongContextAttention` in `processor.hybrid_seq_parallel_attn` and call
it as `layer(attn, query, key, value, joint_tensor_query=..., joint_tensor_key=..., joint_tensor_value=...,
joint_strategy="rear", dropout_p=0.0, causal=False)` on [B, S_local, H, D] tensors. xfuser's own layer runs its
all-to-alls around a local attention (its `attn_processor` hook replaces only that local call), so the post-attention
All-to-All cannot move into the attention epilogue through it. `UlyssesAttention` here takes the same call and runs
the whole Ulysses step in xstage; a user sets it on the processors (an attribute of each processor instance, no
change to xfuser's code):

    from xstage.integrations.xdit import UlyssesAttention
    layer = UlyssesAttention(group)      # group: xfuser's Ulysses process group (ring degree 1)
    for module in transformer.modules():
        if hasattr(getattr(module, "processor", None), "hybrid_seq_parallel_attn"):
            module.processor.hybrid_seq_parallel_attn = layer

Joint tokens follow xfuser's "rear" strategy: the output is this rank's rows followed by the joint rows (all heads),
as xfuser's layer returns them. Not taken (ValueError naming the argument): joint_strategy "front", causal, dropout,
attention-probability outputs, sliding windows, ALiBi. This module needs no xfuser import.
"""
import typing as _typing

import torch as _torch

from .. import distributed as _xdist

__all__ = ["UlyssesAttention"]


class UlyssesAttention(_torch.nn.Module):
    """Drop-in for xfuser's `xFuserLongContextAttention` (Ulysses only) over `group` (an NCCL ProcessGroup)."""

    def __init__(self, group: _typing.Any = None, *, timeout: float = _xdist.DEFAULT_TIMEOUT_S,
                 wait_timeout: float = _xdist.DEFAULT_WAIT_TIMEOUT_S) -> None:
        super().__init__()
        self.group = group
        self.timeout = timeout
        self.wait_timeout = wait_timeout

    def forward(self, attn: _typing.Any, query: _torch.Tensor, key: _torch.Tensor, value: _torch.Tensor, *,
                joint_tensor_query: _torch.Tensor | None = None, joint_tensor_key: _torch.Tensor | None = None,
                joint_tensor_value: _torch.Tensor | None = None, dropout_p: float = 0.0,
                softmax_scale: float | None = None, causal: bool = False, window_size: tuple[int, int] = (-1, -1),
                alibi_slopes: _typing.Any = None, deterministic: bool = False, return_attn_probs: bool = False,
                joint_strategy: str = "none") -> _torch.Tensor:
        where = "xstage.integrations.xdit.UlyssesAttention"
        for name, value_, ok in (("dropout_p", dropout_p, not dropout_p), ("causal", causal, not causal),
                                 ("window_size", window_size, tuple(window_size) == (-1, -1)),
                                 ("alibi_slopes", alibi_slopes, alibi_slopes is None),
                                 ("return_attn_probs", return_attn_probs, not return_attn_probs)):
            if not ok:
                raise ValueError(f"{where}: {name} {value_!r}; accepted: the default (xstage's kernel is non-causal, "
                                 "without dropout, windows or ALiBi)")
        joints = (joint_tensor_query, joint_tensor_key, joint_tensor_value)
        if any(t is not None for t in joints) and not all(t is not None for t in joints):
            raise ValueError(f"{where}: joint_tensor_query, joint_tensor_key and joint_tensor_value: give all three "
                             "or none (as xfuser)")
        if joint_tensor_query is None:
            return _xdist.ulysses_attention(query, key, value, self.group, softmax_scale=softmax_scale,
                                            timeout=self.timeout, wait_timeout=self.wait_timeout)
        if joint_strategy != "rear":
            raise ValueError(f"{where}: joint_strategy {joint_strategy!r} with joint tensors; accepted: 'rear'")
        out, joint_out = _xdist.ulysses_attention(query, key, value, self.group, joint_q=joint_tensor_query,
                                                  joint_k=joint_tensor_key, joint_v=joint_tensor_value,
                                                  joint_strategy="rear", softmax_scale=softmax_scale,
                                                  timeout=self.timeout, wait_timeout=self.wait_timeout)
        return _torch.cat([out, joint_out], dim=1)
