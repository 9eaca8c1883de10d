"""xstage's attention as a diffusers attention backend: `model.set_attention_backend("xstage")`.

    import xstage.integrations.diffusers       # registers the backends "xstage" and "xstage_fp8" with diffusers
    transformer.set_attention_backend("xstage")          # or: with attention_backend("xstage"): ...
    video = pipe(...)             # calls the kernel takes run on it, the others on the fallback (diffusers' "native")
    print(xstage.integrations.diffusers.stats())          # {'routed': ..., 'fallback': {'attn_mask': ...}, ...}

How it hooks in. diffusers keeps its attention backends in `_AttentionBackendRegistry`, keyed by the names of
`AttentionBackendName`; `set_attention_backend(name)`, `attention_backend(name)` and `dispatch_attention_fn` accept
exactly those names. Importing this module (or calling `register()`) adds the names "xstage" and "xstage_fp8" to
`AttentionBackendName` and registers a backend function under each with `_AttentionBackendRegistry.register` (with
context-parallel support), the route diffusers' own backends take. Nothing of diffusers is patched or replaced:
the backend is selected, replaced and restored with diffusers' own switches, and other backends are untouched.

`enable(model)` is a convenience over `model.set_attention_backend(...)`: it configures the backend (fallback,
strict, key-padding masks), remembers the model's previous backends, and `disable(model)` gives them back.
`is_enabled(model)` reads the backends the model's processors have, so it stays true to what runs whichever of
`enable` and `set_attention_backend` was called last.

A call goes to the kernel only when the kernel computes exactly what the fallback backend would (by default
diffusers' "native", PyTorch's SDPA); otherwise it goes to the fallback and is counted under the first reason in
FALLBACK_REASONS that applies. A boolean key-padding mask of shape [B, 1, 1, S_kv] whose true entries are a prefix of
every row (what HunyuanVideo passes) is taken by attending to that prefix only; it costs one device-to-host copy per
distinct mask tensor.

Context parallelism. With `model.enable_parallelism(config=ContextParallelConfig(ulysses_degree=N))`, diffusers
passes each call its parallel config and the sequence-sharded q, k, v. A self-attention call (q and k of the same
length) whose config is Ulysses only (ring_degree 1) then runs the whole Ulysses step in xstage
(`xstage.distributed.ulysses_attention` on diffusers' Ulysses group: pre-attention All-to-All, attention with the
post-attention All-to-All fused into its epilogue). A context-parallel call whose key length differs from the
query's, and ring attention, go to the fallback, which runs diffusers' own context-parallel path (reasons
"context_parallel_cross", "context_parallel").

Precision. The backend "xstage_fp8" (or `enable(model, precision="fp8")`) routes calls to
`xstage.attention(..., precision="fp8")`: 8-bit matrix products after a quantization pre-pass, head dim 128 only
(other head dims fall back, reason "head_dim"), no Ulysses step (context-parallel calls fall back). Its error is
larger than bf16's (docs/attn_fp8.md): compare the model's output with and without it before relying on it.

Supported diffusers: SUPPORTED_DIFFUSERS (the releases with the backend registry and context-parallel backends);
the CPU suite runs against each of TESTED_DIFFUSERS_VERSIONS. Other versions are refused unless allowed.
"""

from . import _diffusers_backend
from ._diffusers_backend import (ALLOW_UNTESTED_ENV, FALLBACK_REASONS, SUPPORTED_DIFFUSERS, TESTED_DIFFUSERS_VERSIONS,
                                 XSTAGE_PRECISIONS, AttentionKernel, backend_names, check_diffusers_version, disable,
                                 enable, enabled, is_enabled, register, reset_stats, stats, xstage_kernel)

__all__ = ["ALLOW_UNTESTED_ENV", "AttentionKernel", "FALLBACK_REASONS", "SUPPORTED_DIFFUSERS",
           "TESTED_DIFFUSERS_VERSIONS", "XSTAGE_PRECISIONS", "backend_names", "check_diffusers_version", "disable",
           "enable", "enabled", "is_enabled", "register", "reset_stats", "stats", "xstage_kernel"]

# Documented (pydoc, help) and pickled under this module, where they are public.
for _obj in (AttentionKernel, backend_names, check_diffusers_version, disable, enable, enabled, is_enabled, register,
             reset_stats, stats, xstage_kernel):
    _obj.__module__ = __name__
del _obj

_diffusers_backend._register_on_import()
