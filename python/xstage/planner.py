"""The platform model, planner and simulator in Python (CPU only, no GPU needed).

Each function runs the xstage CLI's command in process (the C ABI's xstage_cli_run) with `--json`,
keyword arguments mapped to flags (``gap_us=2`` is ``--gap-us 2``, ``True`` a bare flag, a list one
flag followed by its values), and returns the parsed JSON: by construction the same object that
``xstage COMMAND ... --json`` prints. Bad arguments raise ValueError with the CLI's one-line message.

    >>> import xstage.planner as xp
    >>> xp.model(producers=132, bytes_per_producer=32768, gap_us=2)["action"]
    'reshape'
"""

from __future__ import annotations

import ctypes
import json
import math
import os
from typing import Any, Sequence

from . import _native

__all__ = ["CliError", "run", "run_json", "load_platform", "model", "plan", "plan_attn", "plan_moe", "simulate",
           "flags"]


class CliError(RuntimeError):
    """The command failed for a reason other than bad input (CLI exit code 1 or another non-zero code)."""

    def __init__(self, message: str, code: int, stdout: str, stderr: str):
        super().__init__(message)
        self.code = code
        self.stdout = stdout
        self.stderr = stderr


def _take(p: ctypes.c_void_p) -> str:
    if not p.value:
        return ""
    text = ctypes.string_at(p.value).decode("utf-8", "replace")
    _native.lib().xstage_free(p)
    return text


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def run(*args: str) -> str:
    """Runs `xstage ARGS...` in process and returns its standard output.

    Exit code 2 (bad input) raises ValueError with the CLI's message; other failures raise CliError.
    """
    lib = _native.lib()
    encoded = [os.fsencode(str(a)) for a in args]
    argv = (ctypes.c_char_p * max(1, len(encoded)))(*encoded)
    out, err = ctypes.c_void_p(), ctypes.c_void_p()
    code = lib.xstage_cli_run(len(encoded), argv, ctypes.byref(out), ctypes.byref(err))
    stdout, stderr = _take(out), _take(err)
    if code == -1 and not stdout and not stderr:
        raise RuntimeError(f"xstage.planner: {_native.last_error()}")
    if code == 2:
        raise ValueError(_one_line(stderr) or f"xstage {' '.join(map(str, args))}: bad input")
    if code != 0:
        raise CliError(_one_line(stderr) or f"xstage {' '.join(map(str, args))}: exit code {code}", code, stdout,
                       stderr)
    return stdout


def _value_text(name: str, value: Any) -> str:
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{name}: {value!r}; accepted: a finite number")
        return repr(value)  # shortest text that reads back as the same double
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return str(value)


def flags(**kwargs: Any) -> list[str]:
    """Command-line flags for keyword arguments: None and False are left out, True is a bare flag,
    a list or tuple is one flag followed by each value."""
    result: list[str] = []
    for key, value in kwargs.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            result.append(flag)
        elif isinstance(value, (list, tuple)):
            if not value:
                continue
            result.append(flag)
            result.extend(_value_text(key, v) for v in value)
        else:
            result.extend([flag, _value_text(key, value)])
    return result


def run_json(command: Sequence[str], **kwargs: Any) -> Any:
    """Runs `xstage COMMAND... FLAGS... --json` and returns the parsed JSON."""
    text = run(*command, *flags(**kwargs), "--json")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise CliError(f"xstage {' '.join(command)}: output is not JSON ({e})", 0, text, "") from e


def load_platform(path: str | os.PathLike | None = None) -> dict:
    """The platform (an xstage.platform/1 file, or the embedded default) as the model reads it."""
    lib = _native.lib()
    out = ctypes.c_void_p()
    status = lib.xstage_platform_json(None if path is None else os.fsencode(os.fspath(path)), ctypes.byref(out))
    text = _take(out)
    if status != _native.OK:
        _native.raise_for(status, "xstage.planner.load_platform")
    return json.loads(text)


def model(**kwargs: Any) -> dict:
    """`xstage model --json`: issue time, period, recovery gap and verdict of one burst shape
    (producers=, bytes_per_producer=, gap_us=, t_iss0_us=, capacity_bytes=, platform=)."""
    return run_json(["model"], **kwargs)


def plan(**kwargs: Any) -> Any:
    """`xstage plan --json`: the design test of the built-in DiT attention and MoE workloads."""
    return run_json(["plan"], **kwargs)


def plan_attn(**kwargs: Any) -> Any:
    """`xstage plan attn --json`: the attention epilogue All-to-All audit (producers=, block_m=,
    head_dim=, block_n=, sigma_us=, seq=[...], heads_per_gpu=, batch=, platform=, ...)."""
    return run_json(["plan", "attn"], **kwargs)


def plan_moe(**kwargs: Any) -> Any:
    """`xstage plan moe --json`: the MoE Combine audit (shape=, tile_bytes=, t_l1_us=, t_l2_us=, n1=,
    n2=, h_inter=, simulate=True, routing=, ranks=, tokens=, platform=, ...)."""
    return run_json(["plan", "moe"], **kwargs)


def simulate(**kwargs: Any) -> Any:
    """`xstage simulate --json`: event simulation of periodic bursts (producers=, bytes_per_producer=,
    gap_us=, bursts=, completion_coupled=True, ...) or of a schedule file (schedule=PATH)."""
    return run_json(["simulate"], **kwargs)
