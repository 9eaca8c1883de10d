"""Every ```python block of README.md runs as written: each in a fresh interpreter (a subprocess, cwd a temporary
folder, 300 s at most), with the package this test imports.

A block's leading comment lines `# needs: cuda` / `# needs: diffusers` (one requirement per line, any number of
them) skip it where a CUDA device with torch, or diffusers, is not available; `# needs: network` (a block that
downloads, e.g. model weights) runs only with XSTAGE_TEST_NETWORK=1. Every other block must run on a CPU-only
machine (CI). A README without any python block fails. XSTAGE_README names another file to check
(the tests of this file use a small one)."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
TIMEOUT_S = 300
_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_NEEDS = re.compile(r"#\s*needs:\s*(\S+)\s*$")
KNOWN_NEEDS = ("cuda", "diffusers", "network")


def readme_path() -> pathlib.Path:
    return pathlib.Path(os.environ.get("XSTAGE_README") or REPO / "README.md")


def python_blocks(text: str):
    """[(line number of the block's first code line, code)] of the ```python blocks of `text`."""
    return [(text.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in _FENCE.finditer(text)]


def needs_of(code: str) -> list[str]:
    """The `# needs: X` lines at the top of a block (before its first other line)."""
    needs = []
    for line in code.splitlines():
        m = _NEEDS.match(line.strip())
        if not m:
            break
        needs.append(m.group(1))
    return needs


def missing(need: str) -> str:
    """'' when the requirement is met here, else why not."""
    if need == "cuda":
        try:
            import torch
        except ImportError:
            return "needs torch with CUDA (torch not installed)"
        return "" if torch.cuda.is_available() else "needs a CUDA device"
    if need == "diffusers":
        return "" if importlib.util.find_spec("diffusers") is not None else "needs diffusers"
    if need == "network":
        return "" if os.environ.get("XSTAGE_TEST_NETWORK") == "1" else "needs the network (XSTAGE_TEST_NETWORK=1)"
    return f"unknown requirement {need!r} (known: {', '.join(KNOWN_NEEDS)})"


def run_block(code: str, cwd: pathlib.Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    # The package under test, as this interpreter imports it (an installed wheel or PYTHONPATH=python).
    import xstage
    package_root = str(pathlib.Path(xstage.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([package_root, *filter(None, [env.get("PYTHONPATH")])])
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_S)


def check_readme(path: pathlib.Path, tmp_path: pathlib.Path) -> list[str]:
    """Runs every block of `path`; returns the skipped blocks' reasons. Fails on the first failing block."""
    assert path.is_file(), f"{path}: not found"
    blocks = python_blocks(path.read_text())
    assert blocks, f"{path}: no ```python block (the README's examples are what this test runs)"
    skipped = []
    for i, (line, code) in enumerate(blocks):
        reasons = [r for r in (missing(n) for n in needs_of(code)) if r]
        unknown = [r for r in reasons if r.startswith("unknown requirement")]
        assert not unknown, f"{path}:{line}: {unknown[0]}"
        if reasons:
            skipped.append(f"{path.name}:{line}: {'; '.join(reasons)}")
            continue
        cwd = tmp_path / f"block{i}"
        cwd.mkdir()
        result = run_block(code, cwd)
        assert result.returncode == 0, (f"{path}:{line}: the example exits {result.returncode}\n"
                                        f"--- stdout\n{result.stdout[-4000:]}\n--- stderr\n{result.stderr[-4000:]}")
    return skipped


def test_readme_examples_run(tmp_path):
    skipped = check_readme(readme_path(), tmp_path)
    if skipped:
        print("skipped blocks:", *skipped, sep="\n  ")


# --- the checker itself, on small READMEs ---------------------------------------------------------------------

FAKE = """# Title

```python
import pathlib
pathlib.Path("made_here.txt").write_text("ok")
assert pathlib.Path.cwd().name.startswith("block")
```

Text, then a block that needs something absent:

```python
# needs: cuda
# needs: diffusers
raise SystemExit("must not run where cuda or diffusers is missing")
```

```sh
exit 1
```
"""


def test_checker_runs_plain_blocks_and_skips_by_needs(tmp_path, monkeypatch):
    readme = tmp_path / "README.md"
    readme.write_text(FAKE)
    blocks = python_blocks(FAKE)
    assert [line for line, _ in blocks] == [4, 12]
    assert needs_of(blocks[1][1]) == ["cuda", "diffusers"] and needs_of(blocks[0][1]) == []
    monkeypatch.setattr(sys.modules[__name__], "missing", lambda need: f"no {need} here")
    runs = tmp_path / "runs"
    runs.mkdir()
    skipped = check_readme(readme, runs)
    assert skipped == ["README.md:12: no cuda here; no diffusers here"]
    assert (runs / "block0" / "made_here.txt").read_text() == "ok"


def test_checker_fails_on_a_failing_block_and_on_no_block(tmp_path):
    bad = tmp_path / "bad.md"
    bad.write_text("```python\nimport xstage\nraise ValueError('example broke')\n```\n")
    with pytest.raises(AssertionError, match="example broke"):
        check_readme(bad, tmp_path)
    empty = tmp_path / "empty.md"
    empty.write_text("# No examples\n\n```sh\necho hi\n```\n")
    with pytest.raises(AssertionError, match="no ```python block"):
        check_readme(empty, tmp_path)
    unknown = tmp_path / "unknown.md"
    unknown.write_text("```python\n# needs: tpu\nprint(1)\n```\n")
    with pytest.raises(AssertionError, match="unknown requirement 'tpu'"):
        check_readme(unknown, tmp_path)


def test_checker_env_variable_names_the_file(tmp_path, monkeypatch):
    readme = tmp_path / "OTHER.md"
    readme.write_text("```python\nprint('fine')\n```\n")
    monkeypatch.setenv("XSTAGE_README", str(readme))
    assert readme_path() == readme
    assert check_readme(readme_path(), tmp_path) == []
