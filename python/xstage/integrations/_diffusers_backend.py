"""The diffusers attention backends "xstage" and "xstage_fp8": registration with diffusers' backend registry, the
routing of each call (kernel or fallback, with the reason counted), the Ulysses step for context parallelism and the
model switches. Public as xstage.integrations.diffusers, which documents it and registers the backends on import.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import inspect
import os
import sys
import weakref
from typing import Any, Callable, Iterator

__all__ = ["ALLOW_UNTESTED_ENV", "AttentionKernel", "FALLBACK_REASONS", "SUPPORTED_DIFFUSERS",
           "TESTED_DIFFUSERS_VERSIONS", "XSTAGE_PRECISIONS", "backend_names", "check_diffusers_version", "disable",
           "enable", "enabled", "is_enabled", "register", "reset_stats", "stats", "xstage_kernel"]

# The diffusers releases this module registers with (the backend registry with context-parallel backends, 0.36 on),
# and those the CPU suite runs against (scripts/test.sh installs the last; tests/python/test_diffusers_cpu.py).
SUPPORTED_DIFFUSERS = ">=0.36,<0.43"
_SUPPORTED_RANGE = ((0, 36), (0, 43))
TESTED_DIFFUSERS_VERSIONS = ("0.36.0", "0.42.1")
ALLOW_UNTESTED_ENV = "XSTAGE_DIFFUSERS_ALLOW_UNTESTED"

# Why a call went to the previous backend, in the order they are tested (a call counts under the first that applies).
FALLBACK_REASONS = {
    "context_parallel": "a parallel_config the kernel does not take (ring attention, or no Ulysses kernel, as with "
                        "precision fp8): diffusers' context-parallel path of the previous backend runs it",
    "context_parallel_cross": "context parallelism on a cross-attention call (key length differs from the query's)",
    "attention_kwargs": "return_lse=True (the log-sum-exp output), which the backend does not return",
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


class _Stats:
    """Counters of one enabled model (all its processors share them)."""

    def __init__(self, kernel_name: str):
        self.kernel = kernel_name
        self.reset()

    def reset(self) -> None:
        # (batch, seq_q, seq_kv, heads, head_dim) -> calls
        self.routed: collections.Counter[tuple[int, ...]] = collections.Counter()
        self.routed_masked = 0                   # of which had a key-padding prefix mask
        self.routed_context_parallel = 0         # of which ran the Ulysses step (context parallelism)
        # (reason, (batch, seq_q, seq_kv, heads, head_dim)) -> calls
        self.fallback: collections.Counter[tuple[str, tuple[int, ...]]] = collections.Counter()
        self.last_rejection: str | None = None

    def as_dict(self, not_routable) -> dict:
        def rows(counter, with_reason):
            out = []
            for key, n in sorted(counter.items(), key=lambda kv: str(kv[0])):
                reason, shape = key if with_reason else (None, key)
                row = {"reason": reason} if with_reason else {}
                row.update({"shape": list(shape), "calls": n})
                out.append(row)
            return out

        reasons: collections.Counter[str] = collections.Counter()
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
        self._entries: collections.OrderedDict[int, tuple] = collections.OrderedDict()   # id -> (weakref, version, lengths or None)
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


def _run_kernel(kernel: AttentionKernel, query: Any, key: Any, value: Any, scale: Any, lengths: Any) -> Any:
    if lengths is None or all(n == key.shape[1] for n in lengths):
        return kernel.fn(query, key, value, scale)
    if len(set(lengths)) == 1:
        n = lengths[0]
        return kernel.fn(query, key[:, :n].contiguous(), value[:, :n].contiguous(), scale)
    import torch

    outs = [kernel.fn(query[b:b + 1], key[b:b + 1, :n].contiguous(), value[b:b + 1, :n].contiguous(), scale)
            for b, n in enumerate(lengths)]
    return torch.cat(outs, dim=0)


def _version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split(".")[:3]:
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        parts.append(int(digits or 0))
    return tuple(parts)


def _import_diffusers() -> Any:
    try:
        import diffusers
    except ImportError as e:
        raise ImportError(f"xstage.integrations.diffusers needs diffusers ({SUPPORTED_DIFFUSERS}), which is not "
                          f"installed ({e}): pip install 'xstage[diffusers]'") from e
    return diffusers


def check_diffusers_version(allow_untested: bool = False) -> str:
    """The installed diffusers version. Raises ImportError if diffusers is missing; RuntimeError if the version is
    outside SUPPORTED_DIFFUSERS (unless `allow_untested` or the environment variable XSTAGE_DIFFUSERS_ALLOW_UNTESTED=1,
    then warns), or if diffusers lacks the backend registry this module registers with (always)."""
    import warnings

    diffusers = _import_diffusers()
    from diffusers.models import attention_dispatch

    version = str(diffusers.__version__)
    low, high = _SUPPORTED_RANGE
    if not (low <= _version_tuple(version)[:2] < high):
        tested = ", ".join(TESTED_DIFFUSERS_VERSIONS)
        if not (allow_untested or os.environ.get(ALLOW_UNTESTED_ENV) == "1"):
            raise RuntimeError(
                f"xstage.integrations.diffusers supports diffusers {SUPPORTED_DIFFUSERS} (tested: {tested}), found "
                f"diffusers {version}: pip install 'diffusers{SUPPORTED_DIFFUSERS}' (or 'xstage[diffusers]'), or pass "
                f"allow_untested=True / set {ALLOW_UNTESTED_ENV}=1 to try it")
        warnings.warn(f"xstage.integrations.diffusers: diffusers {version} is untested "
                      f"(supported: {SUPPORTED_DIFFUSERS}, tested: {tested})", RuntimeWarning, stacklevel=3)
    registry = getattr(attention_dispatch, "_AttentionBackendRegistry", None)
    names = getattr(attention_dispatch, "AttentionBackendName", None)
    missing = [what for what, ok in (
        ("AttentionBackendName", names is not None and hasattr(names, "NATIVE")),
        ("_AttentionBackendRegistry.register", registry is not None and hasattr(registry, "register")),
        ("_AttentionBackendRegistry._backends", registry is not None and hasattr(registry, "_backends")),
        ("_AttentionBackendRegistry._supported_arg_names",
         registry is not None and hasattr(registry, "_supported_arg_names")),
        ("register(supports_context_parallel=)", registry is not None and hasattr(registry, "register") and
         "supports_context_parallel" in inspect.signature(registry.register).parameters),
    ) if not ok]
    if missing:
        raise RuntimeError(f"xstage.integrations.diffusers: diffusers {version} lacks {', '.join(missing)} of its "
                           f"attention backend registry; this diffusers version is not supported "
                           f"({SUPPORTED_DIFFUSERS})")
    return version


class _Backend:
    """One registered backend: its kernel, how it treats calls it does not take, and its counters."""

    def __init__(self, kernel: AttentionKernel):
        self.kernel = kernel
        self.name = kernel.name
        self.configure()
        self.stats = _Stats(kernel.name)
        self.masks = _MaskCache()
        # diffusers' AttentionBackendName and _AttentionBackendRegistry, set by register() (no import per call:
        # torch.compile traces the backend function)
        self.names: Any = None
        self.registry: Any = None

    def configure(self, fallback: Any = None, strict: bool = False, key_padding_masks: bool = True) -> None:
        self.fallback = fallback          # an AttentionBackendName; None: diffusers' "native"
        self.strict = strict
        self.key_padding_masks = key_padding_masks


# backend name -> _Backend, for every backend this module registered with diffusers in this process.
_BACKENDS: dict[str, _Backend] = {}


def _add_backend_name(names: Any, value: str) -> Any:
    """The AttentionBackendName member of `value`, added to the enum if it has none (diffusers' names are an Enum;
    set_attention_backend and dispatch_attention_fn accept exactly its members)."""
    try:
        return names(value)
    except ValueError:
        pass
    member_name = value.upper()
    member = str.__new__(names, value)
    member._name_ = member_name
    member._value_ = value
    member.__objclass__ = names
    member._sort_order_ = len(names._member_names_)
    names._member_map_[member_name] = member
    names._value2member_map_[value] = member
    names._member_names_.append(member_name)
    type.__setattr__(names, member_name, member)
    return member


def _fallback_target(backend: _Backend) -> tuple[Any, Any, set]:
    names, registry = backend.names, backend.registry
    target = backend.fallback if backend.fallback is not None else names.NATIVE
    return target, registry._backends[target], registry._supported_arg_names[target]


def _call_backend(backend: _Backend, kwargs: dict) -> Any:
    """The registered backend function's body: the kernel where it takes the call, else the fallback backend."""
    query, key, value = kwargs["query"], kwargs["key"], kwargs["value"]
    attn_mask = kwargs.get("attn_mask")
    scale = kwargs.get("scale")
    parallel_config = kwargs.get("_parallel_config")
    extra = {"return_lse": True} if kwargs.get("return_lse") else None
    kernel = backend.kernel
    reason = group = seq_len = None
    if parallel_config is not None:
        reason, group, seq_len = _ulysses_plan(kernel, parallel_config, query, key)
    if reason is None:
        reason = _fallback_reason(kernel, query, key, value, kwargs.get("dropout_p", 0.0),
                                  kwargs.get("is_causal", False), kwargs.get("enable_gqa", False), extra,
                                  parallel_config)
    if reason is None and parallel_config is not None and attn_mask is not None:
        reason = "attn_mask"  # a mask of the sharded sequence: diffusers gathers it in its own path
    lengths = None
    if reason is None and attn_mask is not None:
        if not backend.key_padding_masks or _tracing_or_capturing():
            reason = "attn_mask"
        else:
            lengths = backend.masks.lengths(attn_mask, query.shape[0], key.shape[1])
            reason = "attn_mask" if lengths is None else None
    if reason is None:
        try:
            if parallel_config is not None:
                out = kernel.ulysses(query, key, value, scale, group, seq_len)  # type: ignore[misc]
                backend.stats.routed_context_parallel += 1
            else:
                out = _run_kernel(kernel, query, key, value, scale, lengths)
        except (ValueError, TypeError) as e:  # refused before launch: the fallback computes it
            reason = "kernel_rejected"
            backend.stats.last_rejection = f"{type(e).__name__}: {e}"
        else:
            backend.stats.routed[_shape_key(query, key)] += 1
            backend.stats.routed_masked += attn_mask is not None
            return out
    if backend.strict:
        raise RuntimeError(f"xstage.integrations.diffusers (strict): attention call of shape "
                           f"{tuple(query.shape)} x {tuple(key.shape)} not taken by {kernel.name}: "
                           f"{reason} ({FALLBACK_REASONS[reason]})")
    backend.stats.fallback[(reason, _shape_key(query, key))] += 1
    _, fn, accepted = _fallback_target(backend)
    return fn(**{k: v for k, v in kwargs.items() if k in accepted})


def register(kernel: AttentionKernel | None = None, *, allow_untested: bool = False) -> str:
    """Registers `kernel` (default: xstage's bf16 kernel; `register()` also adds "xstage_fp8") as a diffusers attention
    backend named `kernel.name`, usable from `model.set_attention_backend(name)`, `attention_backend(name)` and
    `dispatch_attention_fn(..., backend=name)`. Returns the name. Registering a name again replaces its kernel.
    Raises ValueError if the name is one of diffusers' own backends, ImportError without diffusers and RuntimeError
    for an unsupported diffusers version (see check_diffusers_version)."""
    where = "xstage.integrations.diffusers.register"
    if kernel is not None and not isinstance(kernel, AttentionKernel):
        raise TypeError(f"{where}: kernel is a {type(kernel).__name__}; accepted: an AttentionKernel or None")
    check_diffusers_version(allow_untested)
    from diffusers.models import attention_dispatch

    if kernel is None:
        register(xstage_kernel("fp8"), allow_untested=allow_untested)
        kernel = xstage_kernel("bf16")
    names = attention_dispatch.AttentionBackendName
    registry = attention_dispatch._AttentionBackendRegistry
    name = kernel.name
    if not isinstance(name, str) or not name or name != name.lower() or not name.replace("_", "").isalnum():
        raise ValueError(f"{where}: kernel.name {name!r}; accepted: a lower-case identifier (e.g. 'xstage')")
    existing = names._value2member_map_.get(name)
    if existing is not None and name not in _BACKENDS:
        raise ValueError(f"{where}: kernel.name {name!r} is diffusers' own backend; give the kernel another name")
    member = _add_backend_name(names, name)
    backend = _BACKENDS.get(name)
    if backend is None:
        backend = _BACKENDS[name] = _Backend(kernel)
    else:
        backend.kernel = kernel
        backend.stats.kernel = name
    backend.names, backend.registry = names, registry
    native = registry._backends[names.NATIVE]

    def xstage_backend(**kwargs: Any) -> Any:
        return _call_backend(backend, kwargs)

    # diffusers passes a backend only the arguments its signature names: take the native backend's, so that every
    # argument it would get reaches the kernel's checks or the fallback.
    xstage_backend.__signature__ = inspect.signature(native)  # type: ignore[attr-defined]
    xstage_backend.__name__ = xstage_backend.__qualname__ = f"{name}_attention"
    xstage_backend.__doc__ = f"diffusers attention backend {name!r} (xstage.integrations.diffusers)."
    registry.register(member, constraints=[], supports_context_parallel=kernel.ulysses is not None)(xstage_backend)
    if kernel.ulysses is None:
        registry._supports_context_parallel.discard(name)
    return name


def backend_names() -> list[str]:
    """The names of the diffusers backends registered by this module in this process."""
    return sorted(_BACKENDS)


def _processors(model: Any) -> Iterator[Any]:
    seen = set()
    for module in model.modules():
        proc = getattr(module, "processor", None)
        if proc is None or id(proc) in seen:
            continue
        seen.add(id(proc))
        yield proc


def _dispatching(proc: Any) -> bool:
    """Whether the processor's attention goes through diffusers' dispatch_attention_fn (and so its backend)."""
    call = getattr(type(proc), "__call__", None)
    code = getattr(call, "__code__", None)
    return (hasattr(proc, "_attention_backend") and code is not None
            and "dispatch_attention_fn" in code.co_names)


def _active_backend() -> Any:
    from diffusers.models.attention_dispatch import _AttentionBackendRegistry

    return _AttentionBackendRegistry._active_backend


def _effective(proc: Any) -> Any:
    backend = proc._attention_backend
    return backend if backend is not None else _active_backend()


def _value(backend: Any) -> str:
    return str(getattr(backend, "value", backend))


def _xstage_backend_of(model: Any) -> str | None:
    """The xstage backend every dispatching processor of `model` runs on; None if any runs on another backend."""
    used = {_value(_effective(p)) for p in _processors(model) if _dispatching(p)}
    if len(used) == 1:
        (name,) = used
        return name if name in _BACKENDS else None
    return None


# model -> (backend name, [(processor, had its own _attention_backend, its value)], previous active backend)
_ENABLED: "weakref.WeakKeyDictionary[Any, tuple[str, list[tuple[Any, bool, Any]], Any]]" = weakref.WeakKeyDictionary()


def enable(model: Any, *, kernel: AttentionKernel | None = None, fallback: str | None = None, strict: bool = False,
           key_padding_masks: bool = True, allow_untested: bool = False, precision: str = "bf16") -> Any:
    """`model.set_attention_backend("xstage")` (or "xstage_fp8" with precision="fp8", or `kernel.name`), with the
    backend configured: calls the kernel does not take go to `fallback` (a diffusers backend name; default: the
    backend the model's processors had, else diffusers' "native"), or raise with `strict`; `key_padding_masks`
    takes boolean prefix masks. The counters (`stats`) start at zero. Returns `model`. `disable(model)` restores
    the previous backends; `model.set_attention_backend(other)` at any time switches to `other` (then
    `is_enabled(model)` is False). Raises ValueError if the model already runs on an xstage backend or has no
    processor that calls diffusers' dispatch_attention_fn."""
    where = "xstage.integrations.diffusers.enable"
    precision = _precision_arg(precision, where)
    if kernel is not None and precision != "bf16":
        raise ValueError(f"{where}: precision {precision!r} with kernel {kernel.name!r}: precision picks xstage's own "
                         "kernel; pass kernel=xstage_kernel(precision) or one of the two")
    check_diffusers_version(allow_untested)
    import torch
    from diffusers.models.attention_dispatch import AttentionBackendName

    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"{where}: model must be a torch.nn.Module (e.g. pipe.transformer), got {type(model).__name__}")
    procs = [p for p in _processors(model) if _dispatching(p)]
    if not procs:
        names = sorted({type(p).__name__ for p in _processors(model)})
        raise ValueError(f"{where}: no attention processor of {type(model).__name__} calls diffusers' "
                         f"dispatch_attention_fn (processors: {names or 'none'})")
    current = _xstage_backend_of(model)
    if current is not None:
        raise ValueError(f"{where}: the model already runs on the xstage backend {current!r}; disable(model) first")
    fallback_member: Any = None
    if fallback is not None:
        try:
            fallback_member = AttentionBackendName(fallback)
        except ValueError:
            raise ValueError(f"{where}: fallback {fallback!r}; accepted: a diffusers attention backend name "
                             f"({', '.join(m.value for m in AttentionBackendName if m.value not in _BACKENDS)})"
                             ) from None
        if fallback_member.value in _BACKENDS:
            raise ValueError(f"{where}: fallback {fallback!r} is an xstage backend; accepted: one of diffusers' own")
    else:
        previous = {_value(_effective(p)) for p in procs}
        fallback_member = AttentionBackendName(previous.pop()) if len(previous) == 1 else None
        if fallback_member is not None and fallback_member.value in _BACKENDS:
            fallback_member = None
    if kernel is not None:
        name = register(kernel, allow_untested=allow_untested)
    else:
        name = _ensure_registered(precision, allow_untested)
    saved = [(p, "_attention_backend" in vars(p), vars(p).get("_attention_backend")) for p in procs]
    backend = _BACKENDS[name]
    backend.configure(fallback_member, bool(strict), bool(key_padding_masks))
    backend.stats.reset()
    _ENABLED[model] = (name, saved, _active_backend())
    model.set_attention_backend(name)  # type: ignore[operator]
    return model


def _ensure_registered(precision: str, allow_untested: bool) -> str:
    name = "xstage" if precision == "bf16" else f"xstage_{precision}"
    if name not in _BACKENDS:
        register(allow_untested=allow_untested)
    return name


def disable(model: Any) -> Any:
    """Takes `model` off xstage's backend: processors still on it get back the backend they had before `enable`
    (or diffusers' default, for a model switched with `set_attention_backend("xstage")`); the process-wide active
    backend likewise if it is still xstage's. Raises ValueError if the model neither was enabled nor runs on an
    xstage backend."""
    from diffusers.models.attention_dispatch import AttentionBackendName, _AttentionBackendRegistry

    entry = _ENABLED.pop(model, None)
    current = _xstage_backend_of(model)
    if entry is None and current is None:
        raise ValueError("xstage.integrations.diffusers.disable: not enabled on this model (it runs on no xstage "
                         "backend)")
    saved = entry[1] if entry is not None else [(p, False, None) for p in _processors(model) if _dispatching(p)]
    for proc, own, value in saved:
        if _value(_effective(proc)) in _BACKENDS:
            if own:
                proc._attention_backend = value
            elif "_attention_backend" in vars(proc):
                del proc._attention_backend
    if _value(_active_backend()) in _BACKENDS:
        previous = entry[2] if entry is not None else None
        if previous is None or _value(previous) in _BACKENDS:
            previous = AttentionBackendName.NATIVE
        _AttentionBackendRegistry._active_backend = previous  # set_active_backend is not in every release
    if entry is not None and entry[0] in _BACKENDS:
        _BACKENDS[entry[0]].configure()
    return model


def is_enabled(model: Any) -> bool:
    """True when every processor of `model` that calls dispatch_attention_fn runs on an xstage backend, whether set
    by `enable` or by `model.set_attention_backend(...)` / the active backend."""
    if "diffusers" not in sys.modules:
        return False
    return _xstage_backend_of(model) is not None


@contextlib.contextmanager
def enabled(model: Any, **kwargs: Any) -> Iterator[Any]:
    """`enable(model, **kwargs)` for the duration of a `with` block."""
    enable(model, **kwargs)
    try:
        yield model
    finally:
        disable(model)


def _backend_for(model: Any, where: str) -> _Backend:
    if model is None:
        if "xstage" not in _BACKENDS:
            raise ValueError(f"{where}: no xstage backend is registered (import xstage.integrations.diffusers)")
        return _BACKENDS["xstage"]
    name = _xstage_backend_of(model)
    if name is None and model in _ENABLED:
        name = _ENABLED[model][0]
    if name is None:
        raise ValueError(f"{where}: not enabled on this model (it runs on no xstage backend)")
    return _BACKENDS[name]


def stats(model: Any = None) -> dict:
    """A snapshot of the counters of the xstage backend `model` runs on (default: "xstage"): routed calls (total, by
    shape [B, S_q, S_kv, H, D]), fallback calls by reason (FALLBACK_REASONS) and by shape, the last kernel
    rejection, and the model's processors that do not go through dispatch_attention_fn. The counters are the
    backend's: every model on that backend adds to them (`enable` and `reset_stats` zero them)."""
    backend = _backend_for(model, "xstage.integrations.diffusers.stats")
    not_routable = [] if model is None else [type(p).__name__ for p in _processors(model) if not _dispatching(p)]
    return backend.stats.as_dict(not_routable)


def reset_stats(model: Any = None) -> None:
    """Zeroes the counters of the xstage backend `model` runs on (default: "xstage")."""
    _backend_for(model, "xstage.integrations.diffusers.reset_stats").stats.reset()


def _register_on_import() -> None:
    import importlib.util
    import warnings

    if importlib.util.find_spec("diffusers") is None:
        return  # register(), enable() and the rest raise ImportError naming the missing package
    try:
        register()
    except (RuntimeError, ImportError) as e:
        warnings.warn(f"xstage.integrations.diffusers: the backends were not registered: {e}", RuntimeWarning,
                      stacklevel=3)
