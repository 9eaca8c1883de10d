"""The package's modules import one way (issue #46): each imports alone in a fresh interpreter, the import graph has
no cycle, the ctypes layers import nothing above them, and a public module's namespace is its API.

The import graph is read from the source (ast), so that an import a test run never reaches still counts. An edge
A -> B is any import statement of A that names B, at module level or inside a function, a class or an
`if TYPE_CHECKING:` block: a function-level import runs as soon as the function is called, and a cycle closed that
way is still a circle (A half-initialized while B reads it), only a later one. `from P import n` is an edge to the
module P.n where n is a module, else to P (the package's __init__ when P is the package). A package's implicit
import by its own submodules is not an edge: Python always initializes a parent first, so counting it would make
every package with an __init__ that re-exports its submodules a cycle; the package's API facade may import
downward, nothing may import up into it by name.

Rule for the namespaces of public modules (no leading underscore in any part of the name): the names of dir(module)
that do not start with "_" are exactly __all__ plus the module's loaded submodules, and every name of __all__ is
there. So `import os as _os`, `import typing as _typing` or a private implementation module re-exported by a thin
facade (numpy's and torch's pattern for their public modules); `from __future__ import annotations` binds the name
`annotations` and so has no place in a public module.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import pathlib
import subprocess
import sys
import types

import pytest

import xstage

PACKAGE_DIR = pathlib.Path(xstage.__file__).resolve().parent
HAS_TORCH = importlib.util.find_spec("torch") is not None

# The modules that import torch when imported (the rest import without it: `import xstage` and the planner need
# no torch). Checked both ways below, so the list cannot go stale.
NEEDS_TORCH = {"xstage._dist_moe", "xstage._dist_team", "xstage._dist_ulysses", "xstage._torch_attention",
               "xstage._torch_moe", "xstage._torch_sdpa", "xstage.distributed", "xstage.integrations.xdit"}

# The ctypes layers and the torch-free helpers they share: each imports only modules of this set (nothing above
# it: no torch layer, no public facade, not the package's __init__) and never torch.
ABI_LAYERS = {"xstage._native", "xstage._dlpack", "xstage._attention_api", "xstage._moe_abi", "xstage._dist_abi"}

# xstage.planner is being moved onto the planner library's typed C ABI (issue #46 item 1) by other work; until that
# lands, these module-level names of its are known leaks (the standard modules and typing names it imports, its
# type aliases, `annotations`). The test fails on any other leak, and on a listed name that no longer leaks.
KNOWN_LEAKS = {"xstage.planner": {"Any", "Integral", "PathLike", "Real", "Sequence", "Union", "annotations", "ctypes",
                                  "json", "locale", "math", "numbers", "os", "re", "threading"}}


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULE_FILES = {_module_name(p): p for p in sorted(PACKAGE_DIR.rglob("*.py"))}
MODULES = sorted(MODULE_FILES)
PUBLIC = [m for m in MODULES if not any(part.startswith("_") and part != "__main__" for part in m.split("."))]


def _imports(name: str) -> set[str]:
    """The package's modules that `name` imports anywhere in its source (see the module docstring)."""
    path = MODULE_FILES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                found.add(sub if sub in MODULE_FILES else source)
    return {m for m in found if m in MODULE_FILES and m != name}


GRAPH = {m: _imports(m) for m in MODULES}


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of `graph` as [a, b, ..., a], or [] when there is none (depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return []

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return []


def test_the_graph_sees_every_module_and_the_known_edges():
    # The walker itself: relative and absolute forms, function-level imports, `from . import name` of a module.
    assert {"xstage", "xstage.moe", "xstage._moe_abi", "xstage.integrations.diffusers"} <= set(MODULES)
    assert "xstage._moe_abi" in GRAPH["xstage.moe"] and "xstage._torch_moe" in GRAPH["xstage.moe"]  # the lazy one
    assert "xstage._torch_sdpa" in GRAPH["xstage._sdpa_registration"]  # inside a function
    assert "xstage.distributed" in GRAPH["xstage.integrations.xdit"]  # `from .. import distributed`
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle():
    cycle = _cycle(GRAPH)
    assert not cycle, "import cycle: " + " -> ".join(cycle)


def test_nothing_imports_the_package_init_by_name_from_below():
    # A submodule reading a name of xstage/__init__.py (`from . import NAME`) closes a circle with the facade.
    up = sorted(m for m, deps in GRAPH.items() if "xstage" in deps and not m.startswith("xstage.integrations."))
    assert up == [], f"modules importing names of xstage/__init__.py: {up}"


@pytest.mark.parametrize("name", sorted(ABI_LAYERS))
def test_abi_layers_import_nothing_above_them(name):
    assert GRAPH[name] <= ABI_LAYERS, f"{name} imports {sorted(GRAPH[name] - ABI_LAYERS)}"
    tree = ast.parse(MODULE_FILES[name].read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and not n.level}
    assert not {m for m in imported if m.split(".")[0] == "torch"}, f"{name} imports torch"


def _import_alone(name: str, block_torch: bool) -> subprocess.CompletedProcess:
    code = ("import sys\n" + ("sys.modules['torch'] = None\n" if block_torch else "") +
            f"import {name}\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("name", MODULES)
def test_each_module_imports_alone_in_a_fresh_interpreter(name):
    if name in NEEDS_TORCH:
        if not HAS_TORCH:
            pytest.skip("needs torch")
        result = _import_alone(name, block_torch=False)
        assert result.returncode == 0, result.stderr[-3000:]
        blocked = _import_alone(name, block_torch=True)  # NEEDS_TORCH is not stale: without torch it fails so
        assert blocked.returncode != 0 and "torch" in blocked.stderr, blocked.stderr[-3000:]
    else:
        result = _import_alone(name, block_torch=True)  # without torch, even where torch is installed
        assert result.returncode == 0, result.stderr[-3000:]


def _public_names(module: types.ModuleType) -> set[str]:
    return {n for n in dir(module) if not n.startswith("_")}


def _loaded_submodules(module: types.ModuleType) -> set[str]:
    # vars(), not getattr(): a lazy attribute (torch's layer) must not be imported by looking.
    return {n for n, v in vars(module).items()
            if isinstance(v, types.ModuleType) and v.__name__ == f"{module.__name__}.{n}"}


@pytest.mark.parametrize("name", PUBLIC)
def test_public_module_namespace_is_its_api(name):
    if name in NEEDS_TORCH and not HAS_TORCH:
        pytest.skip("needs torch")
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert isinstance(exported, list), f"{name} has no __all__ list"
    assert len(set(exported)) == len(exported), f"{name}.__all__ repeats a name"
    missing = sorted(set(exported) - set(dir(module)))
    assert missing == [], f"{name}.__all__ names what dir({name}) lacks: {missing}"
    leaked = _public_names(module) - set(exported) - _loaded_submodules(module)
    known = KNOWN_LEAKS.get(name, set())
    assert leaked - known == set(), f"{name} exposes names outside __all__: {sorted(leaked - known)}"
    assert known - leaked == set(), f"{name} no longer leaks {sorted(known - leaked)}: drop them from KNOWN_LEAKS"


@pytest.mark.parametrize("name", MODULES)
def test_all_names_resolve(name):
    # Every name of __all__ (public and private modules alike) resolves; a lazy torch name only where torch is.
    if name in NEEDS_TORCH and not HAS_TORCH:
        pytest.skip("needs torch")
    module = importlib.import_module(name)
    for attr in getattr(module, "__all__", []):
        try:
            getattr(module, attr)
        except ImportError:
            if HAS_TORCH:
                raise
