"""Runs a diffusers model's attention on xstage's kernel, call by call, with the model's own backend as fallback.

    import xstage.integrations.diffusers as xd
    xd.enable(transformer)        # after any transformer.set_attention_backend(...)
    # or xd.enable(transformer, precision="fp8"): head-dim-128 calls on the FP8 kernel (8-bit matrix products)
    video = pipe(...)             # attention calls xstage takes go to xstage, the others to the previous backend
    print(xd.stats(transformer))  # {'routed': ..., 'fallback': {'attn_mask': ...}, ...}
    xd.disable(transformer)       # or: with xd.enabled(transformer): ...

How it hooks in. diffusers' attention processors call `dispatch_attention_fn(..., backend=self._attention_backend,
parallel_config=self._parallel_config)`, a name each processor's module imported from
`diffusers.models.attention_dispatch`. Its backend registry is keyed by a closed enum, so instead of registering a
backend, `enable` (1) replaces `dispatch_attention_fn` in the modules whose processors the model uses by a router
that hands every call it does not recognise to the function it replaced, unchanged, and (2) sets each processor's
`_attention_backend` to a route object that names the previous backend. Only calls whose backend is such a route
are looked at; other models, and processors of this model set up after `enable`, are untouched. A route is a `str`
equal to the previous backend's name, so diffusers code that reads `processor._attention_backend` (context
parallelism's checks) still sees the previous backend.

Context parallelism. With `model.enable_parallelism(config=ContextParallelConfig(ulysses_degree=N))` (before or
after `enable`), diffusers passes each call its `parallel_config` and the sequence-sharded q, k, v. A self-attention
call (q and k of the same length) whose config is Ulysses only (ring_degree 1) then runs the whole Ulysses step in
xstage (`xstage.distributed.ulysses_attention` on diffusers' Ulysses group: pre-attention All-to-All, attention with
the post-attention All-to-All fused into its epilogue), instead of diffusers' all-to-alls around a local call.
(Wan's cross-attention passes no parallel_config: its sharded queries attend to the whole text locally, on the
kernel.) A context-parallel call whose key length differs from the query's, and ring attention, go to the previous
backend, which runs diffusers' own context-parallel path (reasons "context_parallel_cross", "context_parallel").

A call goes to the kernel only when the kernel computes exactly what the previous backend would; otherwise it goes
to the previous backend and is counted under the first reason in FALLBACK_REASONS that applies. A boolean
key-padding mask of shape [B, 1, 1, S_kv] whose true entries are a prefix of every row (what HunyuanVideo passes)
is taken by attending to that prefix only; it costs one device-to-host copy per distinct mask tensor.

Precision. `enable(model, precision="fp8")` routes calls to `xstage.attention(..., precision="fp8")`: 8-bit matrix
products after a quantization pre-pass, for head dim 128 only (other head dims fall back, reason "head_dim"). That
kernel has no Ulysses step: context-parallel calls fall back (reason "context_parallel"). Its error is larger than
bf16's (docs/attn_fp8.md): compare the model's output with and without it before relying on it.

Tested with diffusers 0.42.1 (TESTED_DIFFUSERS_VERSIONS); other versions are refused unless allowed.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import inspect
import os
import weakref
from typing import Any, Callable

TESTED_DIFFUSERS_VERSIONS = ("0.42.1",)
ALLOW_UNTESTED_ENV = "XSTAGE_DIFFUSERS_ALLOW_UNTESTED"

# The parameters of diffusers.models.attention_dispatch.dispatch_attention_fn the router takes and passes on.
DISPATCH_PARAMETERS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa",
                       "attention_kwargs", "backend", "parallel_config")

# Why a call went to the previous backend, in the order they are tested (a call counts under the first that applies).
FALLBACK_REASONS = {
    "context_parallel": "a parallel_config the kernel does not take (ring attention, or no Ulysses kernel, as with "
                        "precision fp8): diffusers' context-parallel path of the previous backend runs it",
    "context_parallel_cross": "context parallelism on a cross-attention call (key length differs from the query's)",
    "attention_kwargs": "extra attention_kwargs (e.g. return_lse) that the kernel does not take",
    "causal": "is_causal=True",
    "dropout": "dropout_p != 0",
    "device": "a tensor not on the kernel's device type",
    "dtype": "a dtype the kernel does not take, or query/key/value dtypes differ",
    "shape": "not 4-D [B, S, H, D], or batch, key/value or head-dim shapes do not match",
    "gqa": "enable_gqa or fewer key/value heads than query heads",
    "head_dim": "a head dim the kernel does not take (xstage: 64 or 128; with precision fp8: 128)",
    "autograd": "gradients are being recorded and the kernel has no backward",
    "attn_mask": "an attention mask other than a boolean [B, 1, 1, S_kv] key-padding prefix mask "
                 "(or any mask during CUDA-graph capture or torch.compile tracing)",
    "kernel_rejected": "the kernel raised ValueError or TypeError on the inputs (message in stats)",
}


@dataclasses.dataclass(frozen=True)
class AttentionKernel:
    """An attention forward that takes diffusers' layout: fn(query, key, value, scale) -> out, all [B, S, H, D]
    (S_q may differ from S_kv; scale None means 1/sqrt(D)). The fields say which calls it takes."""
    name: str
    fn: Callable[..., Any]
    device_type: str = "cuda"
    dtypes: tuple = ()
    head_dims: tuple = (64, 128)
    differentiable: bool = False
    # Ulysses attention over a context-parallel group: ulysses(query, key, value, scale, group, seq_len) -> out, all
    # [B, S_local, H, D], seq_len None when the shards may be uneven. None: context-parallel calls fall back.
    ulysses: Callable[..., Any] | None = None


# xstage.attention's precisions: the head dims each takes, and whether a Ulysses step (context parallelism) exists.
XSTAGE_PRECISIONS = {"bf16": ((64, 128), True), "fp8": ((128,), False)}


def _precision_arg(precision, where: str) -> str:
    if isinstance(precision, str) and precision in XSTAGE_PRECISIONS:
        return precision
    accepted = ", ".join(repr(p) for p in XSTAGE_PRECISIONS)
    if not isinstance(precision, str):
        raise TypeError(f"{where}: precision is a {type(precision).__name__}; accepted: a str ({accepted})")
    raise ValueError(f"{where}: precision {precision!r}; accepted: {accepted}")


def xstage_kernel(precision: str = "bf16") -> AttentionKernel:
    """xstage's attention forward (`xstage.attention`): CUDA, bf16 in and out, non-causal, no mask. precision "bf16":
    head dim 64 or 128, with the Ulysses step for context parallelism; "fp8" (kernel name "xstage_fp8"): 8-bit
    matrix products, head dim 128, no Ulysses step."""
    precision = _precision_arg(precision, "xstage.integrations.diffusers.xstage_kernel")
    import torch

    head_dims, has_ulysses = XSTAGE_PRECISIONS[precision]

    def fn(query, key, value, scale):
        import xstage   # on first use: routing (and every fallback) works without loading the native library

        return xstage.attention(query, key, value, softmax_scale=scale, precision=precision)

    def ulysses(query, key, value, scale, group, seq_len):
        import xstage.distributed

        return xstage.distributed.ulysses_attention(query, key, value, group, softmax_scale=scale, seq_len=seq_len)

    name = "xstage" if precision == "bf16" else f"xstage_{precision}"
    return AttentionKernel(name, fn, "cuda", (torch.bfloat16,), head_dims, False, ulysses if has_ulysses else None)


def _ulysses_plan(kernel, parallel_config, query, key):
    """(reason, group, seq_len): reason None when the kernel's Ulysses path takes the context-parallel call; seq_len
    None when diffusers' ulysses_anything allows uneven shards (the lengths are then gathered and checked)."""
    cp = getattr(parallel_config, "context_parallel_config", None)
    if kernel.ulysses is None or cp is None or (cp.ring_degree or 1) != 1:
        return "context_parallel", None, None
    mesh = getattr(cp, "_ulysses_mesh", None)
    if mesh is None:
        return "context_parallel", None, None
    if query.dim() == 4 and key.dim() == 4 and key.shape[1] != query.shape[1]:
        return "context_parallel_cross", None, None
    world = cp.ulysses_degree or 1
    seq_len = None if getattr(cp, "ulysses_anything", False) else int(query.shape[1]) * world
    return None, mesh.get_group(), seq_len


def check_diffusers_version(allow_untested: bool = False) -> str:
    """The installed diffusers version; raises RuntimeError if it is not a tested one (unless `allow_untested` or
    the environment variable XSTAGE_DIFFUSERS_ALLOW_UNTESTED=1, then warns), or if dispatch_attention_fn does not
    have the parameters the router passes on (always)."""
    import warnings

    import diffusers
    from diffusers.models import attention_dispatch

    version = diffusers.__version__
    if version not in TESTED_DIFFUSERS_VERSIONS:
        tested = ", ".join(TESTED_DIFFUSERS_VERSIONS)
        if not (allow_untested or os.environ.get(ALLOW_UNTESTED_ENV) == "1"):
            raise RuntimeError(
                f"xstage.integrations.diffusers is tested with diffusers {tested}, found diffusers {version}: "
                f"install diffusers=={TESTED_DIFFUSERS_VERSIONS[-1]} (pip install 'xstage[diffusers]'), or pass "
                f"allow_untested=True / set {ALLOW_UNTESTED_ENV}=1 to try it")
        warnings.warn(f"xstage.integrations.diffusers: diffusers {version} is untested (tested: {tested})",
                      RuntimeWarning, stacklevel=3)
    params = tuple(inspect.signature(attention_dispatch.dispatch_attention_fn).parameters)
    if params != DISPATCH_PARAMETERS:
        raise RuntimeError(
            f"xstage.integrations.diffusers: diffusers {version}'s dispatch_attention_fn takes {params}, "
            f"expected {DISPATCH_PARAMETERS}; this diffusers version is not supported")
    return version


class _Stats:
    """Counters of one enabled model (all its processors share them)."""

    def __init__(self, kernel_name: str):
        self.kernel = kernel_name
        self.reset()

    def reset(self):
        self.routed = collections.Counter()      # (batch, seq_q, seq_kv, heads, head_dim) -> calls
        self.routed_masked = 0                   # of which had a key-padding prefix mask
        self.routed_context_parallel = 0         # of which ran the Ulysses step (context parallelism)
        self.fallback = collections.Counter()    # (reason, (batch, seq_q, seq_kv, heads, head_dim)) -> calls
        self.last_rejection = None

    def as_dict(self, not_routable) -> dict:
        def rows(counter, with_reason):
            out = []
            for key, n in sorted(counter.items(), key=lambda kv: str(kv[0])):
                reason, shape = key if with_reason else (None, key)
                row = {"reason": reason} if with_reason else {}
                row.update({"shape": list(shape), "calls": n})
                out.append(row)
            return out

        reasons = collections.Counter()
        for (reason, _), n in self.fallback.items():
            reasons[reason] += n
        return {"kernel": self.kernel, "routed": sum(self.routed.values()), "routed_with_mask": self.routed_masked,
                "routed_context_parallel": self.routed_context_parallel,
                "fallback": dict(reasons), "fallback_total": sum(reasons.values()),
                "routed_by_shape": rows(self.routed, False), "fallback_by_shape": rows(self.fallback, True),
                "last_kernel_rejection": self.last_rejection,
                "not_routable_processors": dict(collections.Counter(not_routable))}


def _shape_key(query, key):
    if query.dim() != 4 or key.dim() != 4:
        return tuple(query.shape)
    return (query.shape[0], query.shape[1], key.shape[1], query.shape[2], query.shape[3])


def _fallback_reason(kernel, query, key, value, dropout_p, is_causal, enable_gqa, attention_kwargs, parallel_config):
    """The first FALLBACK_REASONS entry that applies to a call, the mask aside; None if the kernel takes it."""
    import torch

    if attention_kwargs:
        return "attention_kwargs"
    if is_causal:
        return "causal"
    if dropout_p:
        return "dropout"
    tensors = (query, key, value)
    if any(not isinstance(t, torch.Tensor) or t.device.type != kernel.device_type for t in tensors):
        return "device"
    if query.dtype not in kernel.dtypes or key.dtype != query.dtype or value.dtype != query.dtype:
        return "dtype"
    if (any(t.dim() != 4 for t in tensors) or key.shape != value.shape or key.shape[0] != query.shape[0]
            or key.shape[3] != query.shape[3]):
        return "shape"
    if enable_gqa or key.shape[2] != query.shape[2]:
        return "gqa"
    if query.shape[3] not in kernel.head_dims:
        return "head_dim"
    if not kernel.differentiable and torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        return "autograd"
    return None


def _tracing_or_capturing() -> bool:
    import torch

    compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    if compiling is not None and compiling():
        return True
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


class _MaskCache:
    """Key-padding prefix lengths of the masks seen last, keyed by the mask tensor (weakly) and its version, so a
    mask shared by all blocks of a forward costs one device-to-host copy.

    Inference tensors (made under torch.inference_mode()) have no version counter, and inside inference mode
    they can still be modified in place: their lengths are recomputed on every call (one device-to-host copy
    each), never cached."""

    def __init__(self, size: int = 8):
        self._entries = collections.OrderedDict()   # id -> (weakref, version, lengths or None)
        self._size = size

    def lengths(self, mask, batch: int, seq_kv: int):
        """Per-batch prefix lengths (a list of `batch` ints, each >= 1) if `mask` is a boolean [B|1, 1, 1, S_kv]
        mask whose true entries form a prefix of each row; None otherwise."""
        import torch

        if (not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.dim() != 4
                or mask.shape[1] != 1 or mask.shape[2] != 1 or mask.shape[3] != seq_kv
                or mask.shape[0] not in (1, batch)):
            return None
        version = None if mask.is_inference() else mask._version
        hit = self._entries.get(id(mask)) if version is not None else None
        if hit is not None and hit[0]() is mask and hit[1] == version:
            found = hit[2]
        else:
            rows = mask.reshape(mask.shape[0], seq_kv)
            n = rows.sum(dim=1)
            prefix = torch.arange(seq_kv, device=mask.device).unsqueeze(0) < n.unsqueeze(1)
            ok = (rows == prefix).all(dim=1)
            values = torch.cat([n, ok.to(n.dtype)]).tolist()   # the one synchronisation
            n_list, ok_list = values[:mask.shape[0]], values[mask.shape[0]:]
            found = n_list if all(ok_list) and min(n_list) >= 1 else None
            if version is not None:
                self._entries[id(mask)] = (weakref.ref(mask), version, found)
                while len(self._entries) > self._size:
                    self._entries.popitem(last=False)
        if found is None:
            return None
        return found * batch if len(found) == 1 else list(found)


class _ModelState:
    def __init__(self, kernel, strict, key_padding_masks):
        self.kernel = kernel
        self.strict = strict
        self.key_padding_masks = key_padding_masks
        self.stats = _Stats(kernel.name)
        self.masks = _MaskCache()
        self.processors = []       # (processor, had_own_attribute, own_value, route)
        self.modules = []          # globals dicts whose dispatch_attention_fn we replaced (one entry per processor)
        self.not_routable = []     # class names of processors that do not call dispatch_attention_fn


class _Route(str):
    """A processor's `_attention_backend` while enabled: equal (as a str) to the previous backend's name."""

    def __new__(cls, name: str, previous, state: _ModelState):
        obj = super().__new__(cls, name)
        obj.previous = previous
        obj.state = state
        return obj

    def __reduce__(self):  # a pickled or copied processor gets the previous backend back, not the route
        return (_unrouted, (self.previous,))

    def __deepcopy__(self, memo):
        return self.previous


def _unrouted(previous):
    return previous


def _run_kernel(state, query, key, value, scale, lengths):
    kernel = state.kernel
    if lengths is None or all(n == key.shape[1] for n in lengths):
        return kernel.fn(query, key, value, scale)
    if len(set(lengths)) == 1:
        n = lengths[0]
        return kernel.fn(query, key[:, :n].contiguous(), value[:, :n].contiguous(), scale)
    import torch

    outs = [kernel.fn(query[b:b + 1], key[b:b + 1, :n].contiguous(), value[b:b + 1, :n].contiguous(), scale)
            for b, n in enumerate(lengths)]
    return torch.cat(outs, dim=0)


def _dispatch(route, inner, query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa,
              attention_kwargs, parallel_config):
    state = route.state
    reason = group = seq_len = None
    if parallel_config is not None:
        reason, group, seq_len = _ulysses_plan(state.kernel, parallel_config, query, key)
    if reason is None:
        reason = _fallback_reason(state.kernel, query, key, value, dropout_p, is_causal, enable_gqa, attention_kwargs,
                                  parallel_config)
    if reason is None and parallel_config is not None and attn_mask is not None:
        reason = "attn_mask"  # a mask of the sharded sequence: diffusers gathers it in its own path
    lengths = None
    if reason is None and attn_mask is not None:
        if not state.key_padding_masks or _tracing_or_capturing():
            reason = "attn_mask"
        else:
            lengths = state.masks.lengths(attn_mask, query.shape[0], key.shape[1])
            reason = "attn_mask" if lengths is None else None
    if reason is None:
        try:
            if parallel_config is not None:
                out = state.kernel.ulysses(query, key, value, scale, group, seq_len)
                state.stats.routed_context_parallel += 1
            else:
                out = _run_kernel(state, query, key, value, scale, lengths)
        except (ValueError, TypeError) as e:  # rejected before launch: the previous backend computes it
            reason = "kernel_rejected"
            state.stats.last_rejection = f"{type(e).__name__}: {e}"
        else:
            state.stats.routed[_shape_key(query, key)] += 1
            state.stats.routed_masked += attn_mask is not None
            return out
    if state.strict:
        raise RuntimeError(f"xstage.integrations.diffusers (strict): attention call of shape "
                           f"{tuple(query.shape)} x {tuple(key.shape)} not taken by {state.kernel.name}: "
                           f"{reason} ({FALLBACK_REASONS[reason]})")
    state.stats.fallback[(reason, _shape_key(query, key))] += 1
    return inner(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                 enable_gqa=enable_gqa, attention_kwargs=attention_kwargs, backend=route.previous,
                 parallel_config=parallel_config)


def _make_router(inner):
    def dispatch_attention_fn(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                              enable_gqa=False, attention_kwargs=None, *, backend=None, parallel_config=None):
        if isinstance(backend, _Route):
            return _dispatch(backend, inner, query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa,
                             attention_kwargs, parallel_config)
        return inner(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                     enable_gqa=enable_gqa, attention_kwargs=attention_kwargs, backend=backend,
                     parallel_config=parallel_config)

    dispatch_attention_fn.__wrapped__ = inner
    dispatch_attention_fn.__doc__ = "xstage's router in front of diffusers' dispatch_attention_fn (__wrapped__)."
    return dispatch_attention_fn


# id(globals dict) -> [globals, inner, router, users]; a module's router stays while any enabled processor uses it.
_ROUTED_MODULES: dict = {}
_STATES: "weakref.WeakKeyDictionary[Any, _ModelState]" = weakref.WeakKeyDictionary()


def _install_router(g: dict):
    entry = _ROUTED_MODULES.get(id(g))
    if entry is None:
        inner = g["dispatch_attention_fn"]
        entry = _ROUTED_MODULES[id(g)] = [g, inner, _make_router(inner), 0]
        g["dispatch_attention_fn"] = entry[2]
    entry[3] += 1


def _release_router(g: dict):
    entry = _ROUTED_MODULES[id(g)]
    entry[3] -= 1
    if entry[3] == 0:
        del _ROUTED_MODULES[id(g)]
        if g.get("dispatch_attention_fn") is entry[2]:   # leave it if someone replaced it after us
            g["dispatch_attention_fn"] = entry[1]


def _processors(model):
    seen = set()
    for module in model.modules():
        proc = getattr(module, "processor", None)
        if proc is None or id(proc) in seen:
            continue
        seen.add(id(proc))
        yield proc


def _backend_name(backend) -> str:
    from diffusers.models.attention_dispatch import AttentionBackendName, _AttentionBackendRegistry

    if backend is None:
        backend = _AttentionBackendRegistry.get_active_backend()[0]
    return AttentionBackendName(backend).value


def enable(model, *, kernel: AttentionKernel | None = None, fallback: str | None = None, strict: bool = False,
           key_padding_masks: bool = True, allow_untested: bool = False, precision: str = "bf16"):
    """Routes the attention calls of `model`'s processors that `kernel` (default: xstage's, `xstage_kernel(precision)`)
    takes to it; the others go to each processor's current backend, or to `fallback` (a diffusers backend name) if
    given. `strict` raises on a call the kernel does not take instead. `precision` ("bf16" or "fp8") picks xstage's
    kernel; with `kernel` given it must stay "bf16" (a kernel brings its own). Call it after
    `model.set_attention_backend(...)` (which replaces the routes). Returns `model`. Raises ValueError if already
    enabled or if no processor of the model calls diffusers' dispatch_attention_fn."""
    where = "xstage.integrations.diffusers.enable"
    precision = _precision_arg(precision, where)
    if kernel is not None and precision != "bf16":
        raise ValueError(f"{where}: precision {precision!r} with kernel {kernel.name!r}: precision picks xstage's own "
                         "kernel; pass kernel=xstage_kernel(precision) or one of the two")
    check_diffusers_version(allow_untested)
    import torch
    from diffusers.models.attention_dispatch import AttentionBackendName

    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"xstage.integrations.diffusers.enable: model must be a torch.nn.Module (e.g. "
                        f"pipe.transformer), got {type(model).__name__}")

    if model in _STATES:
        raise ValueError("xstage.integrations.diffusers.enable: already enabled on this model; disable(model) first")
    if fallback is not None:
        fallback = AttentionBackendName(fallback)   # ValueError naming the value for an unknown backend
    state = _ModelState(kernel or xstage_kernel(precision), strict, key_padding_masks)
    plan = []
    for proc in _processors(model):
        call = getattr(type(proc), "__call__", None)
        g = getattr(call, "__globals__", None)
        if (not hasattr(proc, "_attention_backend") or g is None or "dispatch_attention_fn" not in g
                or "dispatch_attention_fn" not in call.__code__.co_names):
            state.not_routable.append(type(proc).__name__)
            continue
        current = proc._attention_backend
        if isinstance(current, _Route):
            raise ValueError(f"xstage.integrations.diffusers.enable: processor {type(proc).__name__} is already "
                             "routed (shared with another enabled model)")
        plan.append((proc, g, current if fallback is None else fallback))
    if not plan:
        raise ValueError("xstage.integrations.diffusers.enable: no attention processor of "
                         f"{type(model).__name__} calls diffusers' dispatch_attention_fn "
                         f"(processors: {sorted(set(state.not_routable)) or 'none'})")
    for proc, g, previous in plan:
        own = "_attention_backend" in vars(proc)
        route = _Route(_backend_name(previous), previous, state)
        _install_router(g)
        state.modules.append(g)
        state.processors.append((proc, own, vars(proc).get("_attention_backend"), route))
        proc._attention_backend = route
    _STATES[model] = state
    return model


def disable(model):
    """Undoes `enable`: each processor gets back the backend it had (unless it was set to another since)."""
    state = _STATES.pop(model, None)
    if state is None:
        raise ValueError("xstage.integrations.diffusers.disable: not enabled on this model")
    for proc, own, value, route in state.processors:
        if vars(proc).get("_attention_backend") is route:
            if own:
                proc._attention_backend = value
            else:
                del proc._attention_backend
    for g in state.modules:
        _release_router(g)
    return model


def is_enabled(model) -> bool:
    return model in _STATES


@contextlib.contextmanager
def enabled(model, **kwargs):
    """`enable(model, **kwargs)` for the duration of a `with` block."""
    enable(model, **kwargs)
    try:
        yield model
    finally:
        disable(model)


def stats(model) -> dict:
    """A snapshot of the model's counters: routed calls (total, by shape [B, S_q, S_kv, H, D]), fallback calls by
    reason (FALLBACK_REASONS) and by shape, the last kernel rejection and the processors that could not be routed."""
    state = _STATES.get(model)
    if state is None:
        raise ValueError("xstage.integrations.diffusers.stats: not enabled on this model")
    return state.stats.as_dict(state.not_routable)


def reset_stats(model) -> None:
    state = _STATES.get(model)
    if state is None:
        raise ValueError("xstage.integrations.diffusers.reset_stats: not enabled on this model")
    state.stats.reset()
