"""Registers xstage with PyTorch's SDPA implementation registry (`torch.nn.attention.register_flash_attention_impl`,
torch 2.10 on) without importing torch: `import xstage` calls `install()`, which registers at once if torch is already
imported, else when `torch.nn.attention` is first imported (a one-shot import hook). Registering only names the
implementation; `torch.nn.attention.activate_flash_attention_impl("xstage")` switches it on (xstage/_torch_sdpa.py).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any, Sequence

IMPL_NAME = "xstage"
_TARGET = "torch.nn.attention"
_registered = False


def _activate() -> Any:
    """The register_fn torch calls on activate_flash_attention_impl("xstage")."""
    from . import _torch_sdpa

    return _torch_sdpa.activate()


def register(attention_module: types.ModuleType | None = None) -> bool:
    """Registers "xstage" with torch's registry; False where the installed torch has none (before 2.10)."""
    global _registered
    module = attention_module if attention_module is not None else sys.modules.get(_TARGET)
    register_fn = getattr(module, "register_flash_attention_impl", None)
    if register_fn is None:
        return False
    register_fn(IMPL_NAME, register_fn=_activate)
    _registered = True
    return True


def is_registered() -> bool:
    return _registered


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader):
        self._inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self._inner.exec_module(module)
        try:
            register(module)
        except Exception:  # pragma: no cover - never let torch's import fail because of xstage
            pass


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != _TARGET:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)  # one shot: the real finders locate the module
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _Loader(spec.loader)
        return spec


def install() -> None:
    """Registers now if torch.nn.attention is loaded, else when it is first imported. Never imports torch."""
    if _TARGET in sys.modules:
        try:
            register()
        except Exception:  # pragma: no cover
            pass
        return
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
