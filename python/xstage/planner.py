"""The platform model, planner and simulator in Python (CPU only, no GPU needed).

`model`, `simulate`, `plan`, `plan_attn`, `plan_moe`, `fit` and `fidelity` call the planner library's typed C ABI
(xstage_planner_model, xstage_planner_simulate, xstage_planner_plan, xstage_planner_plan_attn,
xstage_planner_plan_moe, xstage_planner_fit, xstage_planner_fidelity: the keyword arguments as one JSON request, the
command's JSON output back; `simulate` and `plan_moe` with a `trace` file, `fit` and `fidelity` with an `out` file
still run the CLI, which writes it); the other functions (`run`, `run_json`) run the
xstage CLI's command in process (xstage_cli_run of the command line's own library, libxstage_cli.so) with `--json`,
typed keyword arguments mapped to flags (``gap_us=2`` is ``--gap-us 2``,
``True`` a bare flag, a list one flag followed by its values). Either way the result is the parsed JSON: the same
object that ``xstage COMMAND ... --json`` prints, since the CLI calls the same planner functions. Bad values raise
ValueError with the CLI's one-line message, the arguments in it written as the Python keyword names (``gap_us``,
not ``--gap-us``); an unknown keyword raises TypeError.
Numbers are any ``numbers.Real`` / ``numbers.Integral`` (Python, NumPy); the library runs in the "C" numeric
locale whatever the host process set (LC_NUMERIC), so ``2.5`` is read and printed as ``2.5``.

    >>> import xstage.planner as xp
    >>> xp.model(producers=132, bytes_per_producer=32768, gap_us=2)["action"]
    'reshape'
"""

from __future__ import annotations

import ctypes
import json
import locale
import math
import numbers
import os
import re
import threading
from typing import Any, Sequence, Union

from . import _native

__all__ = ["CliError", "run", "run_json", "load_platform", "model", "plan", "plan_attn", "plan_moe", "simulate",
           "fit", "fidelity", "flags"]


class CliError(RuntimeError):
    """The command failed for a reason other than bad input (CLI exit code 1 or another non-zero code)."""

    def __init__(self, message: str, code: int, stdout: str, stderr: str) -> None:
        super().__init__(message)
        self.code = code
        self.stdout = stdout
        self.stderr = stderr


def _take(p: ctypes.c_void_p, free: str = "xstage_free", library: ctypes.CDLL | None = None) -> str:
    """The string at `p` as text, released with the function `free` of `library` (default: the C ABI library)."""
    if not p.value:
        return ""
    text = ctypes.string_at(p.value).decode("utf-8", "replace")
    getattr(library or _native.lib(), free)(p)
    return text


# Code points a terminal acts on although they are printable text: C1 controls and bidirectional marks (the set
# the library's bounded_text escapes, xstage/model/bounded_text.hpp).
_TERMINAL_ACTIVE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _bounded(text: str, limit: int = 80) -> str:
    """User data or a message as errors show it: one line, control characters, C1 controls and bidirectional marks
    escaped (\\n, \\x1b, \\u202e), cut after about `limit` characters (never inside an escape) with the whole size
    noted ("... (1000000 bytes)"). The one helper of this module for every echo of a value."""
    pieces: list[str] = []
    size = 0
    for c in text:
        if _TERMINAL_ACTIVE.match(c):
            c = _NAMED_ESCAPES.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x80 else f"\\u{ord(c):04x}")
        if size + len(c) > limit:
            return "".join(pieces) + f"... ({len(text.encode('utf-8', 'surrogatepass'))} bytes)"
        pieces.append(c)
        size += len(c)
    return "".join(pieces)


def _shown(value: Any) -> str:
    """A Python value in a message: its repr, bounded (_bounded)."""
    return _bounded(repr(value))


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    return _bounded(lines[-1], 600) if lines else ""


PathLike = Union[str, "os.PathLike[str]"]
Real = Union[float, int, numbers.Real]
Integral = Union[int, numbers.Integral]

_locale_lock = threading.Lock()


def _in_c_locale(call: Any) -> Any:
    """call() in the "C" numeric locale, the host's restored after."""
    with _locale_lock:
        numeric = locale.setlocale(locale.LC_NUMERIC)
        if numeric not in ("C", "POSIX"):
            locale.setlocale(locale.LC_NUMERIC, "C")
        try:
            return call()
        finally:
            if numeric not in ("C", "POSIX"):
                locale.setlocale(locale.LC_NUMERIC, numeric)


def _run_raw(args: Sequence[Any]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `xstage ARGS...` run in process, in the "C" numeric locale."""
    lib = _native.cli_lib()
    encoded = [os.fsencode(str(a)) if not isinstance(a, bytes) else a for a in args]
    argv = (ctypes.c_char_p * max(1, len(encoded)))(*encoded)
    out, err = ctypes.c_void_p(), ctypes.c_void_p()
    code = _in_c_locale(lambda: lib.xstage_cli_run(len(encoded), argv, ctypes.byref(out), ctypes.byref(err)))
    return code, _take(out, "xstage_cli_free", lib), _take(err, "xstage_cli_free", lib)


def _request_value(name: str, value: Any) -> Any:
    """A keyword argument as a JSON value of a planner request (the same rules as flags())."""
    if isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        number = float(value)
        if not math.isfinite(number):
            raise ValueError(f"{name}: {_shown(value)}; accepted: a finite number")
        return number
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return [_request_value(name, v) for v in value]
    raise TypeError(f"{name} is a {type(value).__name__} ({_shown(value)}); accepted: a number, a str or a path")


def _int_list(values: Any) -> Any:
    """A list argument of a request: one integer is a list of one, an empty or None one is not given (the CLI's
    default), any other sequence a list."""
    if values is None or isinstance(values, (str, bytes)):
        return values or None
    if isinstance(values, numbers.Integral):
        return [values]
    return list(values) or None


def _path_list(paths: Any) -> Any:
    """A list-of-files argument of a request: one path is a list of one, an empty or None one is not given, any
    other sequence a list."""
    if paths is None or isinstance(paths, (str, bytes, os.PathLike)):
        return [paths] if paths else None
    return list(paths) or None


def _planner_call(command: str, **kwargs: Any) -> Any:
    """The planner library's typed C ABI (xstage_planner_COMMAND): the keyword arguments (None left out) as the
    JSON request, the command's JSON output parsed. A bad request raises ValueError with the message the CLI
    prints for the same arguments (``xstage: error: gap_us: must be in [0, 1e+06], got -1``)."""
    request = {k: _request_value(k, v) for k, v in kwargs.items() if v is not None}
    entry = getattr(_native.lib(), "xstage_planner_" + command)
    text = json.dumps(request, allow_nan=False).encode()
    out, err = ctypes.c_void_p(), ctypes.c_void_p()
    code = _in_c_locale(lambda: entry(text, ctypes.byref(out), ctypes.byref(err)))
    response, message = _take(out, "xstage_planner_free"), _take(err, "xstage_planner_free")
    message = _bounded(_python_names(message, list(kwargs)), 600)  # a flag in a nested message, as run_json names it
    if code == 2:
        raise ValueError(f"xstage: error: {message}")
    if code != 0:
        raise CliError(f"xstage: failed: {message}", code, response, message)
    return json.loads(response)


def run(*args: str) -> str:
    """Runs `xstage ARGS...` in process and returns its standard output.

    Exit code 2 (bad input) raises ValueError with the CLI's message; other failures raise CliError.
    """
    code, stdout, stderr = _run_raw(args)
    if code == -1:
        raise RuntimeError(f"xstage.planner: {_one_line(stderr) or 'the command line library failed'}")
    if code == 2:
        raise ValueError(_one_line(stderr) or f"xstage {' '.join(map(str, args))}: bad input")
    if code != 0:
        raise CliError(_one_line(stderr) or f"xstage {' '.join(map(str, args))}: exit code {code}", code, stdout,
                       stderr)
    return stdout


def _value_text(name: str, value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        number = float(value)
        if not math.isfinite(number):
            raise ValueError(f"{name}: {_shown(value)}; accepted: a finite number")
        return repr(number)  # shortest text that reads back as the same double, always with a '.'
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, str):
        return value
    raise TypeError(f"{name} is a {type(value).__name__} ({_shown(value)}); accepted: a number, a str or a path")


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


_FLAG = re.compile(r"--([a-z0-9][a-z0-9-]*)")


def _python_names(message: str, names: Sequence[str]) -> str:
    """The CLI's message with each flag of `names` written as its keyword name (--gap-us -> gap_us)."""
    known = set(names)
    return _FLAG.sub(lambda m: m.group(1).replace("-", "_") if m.group(1).replace("-", "_") in known
                     else m.group(0), message)


def run_json(command: Sequence[str], **kwargs: Any) -> Any:
    """Runs `xstage COMMAND... FLAGS... --json` and returns the parsed JSON. A ValueError names the flags of
    `kwargs` by their keyword names."""
    try:
        text = run(*command, *flags(**kwargs), "--json")
    except ValueError as e:
        raise ValueError(_python_names(str(e), list(kwargs))) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise CliError(f"xstage {' '.join(command)}: output is not JSON ({e})", 0, text, "") from e


def load_platform(path: PathLike | None = None) -> dict:
    """The platform (an xstage.platform/1 file, or the embedded default) as the model reads it."""
    lib = _native.lib()
    out = ctypes.c_void_p()
    status = lib.xstage_platform_json(None if path is None else os.fsencode(os.fspath(path)), ctypes.byref(out))
    text = _take(out)
    if status != _native.OK:
        _native.raise_for(status, "xstage.planner.load_platform")
    return json.loads(text)


def model(*, producers: Integral, bytes_per_producer: Real, gap_us: Real | None = None, t_iss0_us: Real | None = None,
          capacity_bytes: Real | None = None, platform: PathLike | None = None) -> dict:
    """`xstage model --json`: issue time, period, recovery gap and verdict of one burst shape: `producers` K
    aligned producers each storing `bytes_per_producer` B bytes, `gap_us` G producer-side gap between bursts;
    `t_iss0_us` overrides the platform's T_iss0, `capacity_bytes` its Q; `platform` an xstage.platform/1 file."""
    return _planner_call("model", producers=producers, bytes_per_producer=bytes_per_producer, gap_us=gap_us,
                        t_iss0_us=t_iss0_us, capacity_bytes=capacity_bytes, platform=platform)


def plan(*, producers: Integral | None = None, platform: PathLike | None = None) -> Any:
    """`xstage plan --json`: the design test of the built-in DiT attention and MoE workloads (`producers`: K,
    default the platform's largest measured K)."""
    return _planner_call("plan", producers=producers, platform=platform)


def plan_attn(*, producers: Integral | None = None, block_m: Integral | None = None,
              head_dim: Integral | None = None, block_n: Integral | None = None, out_bytes: Integral | None = None,
              sigma_us: Real | None = None, qk_cover_us: Real | None = None, latency_us: Real | None = None,
              cover_us: Real | None = None, seq: Sequence[Integral] | None = None,
              heads_per_gpu: Integral | None = None, batch: Integral | None = None,
              platform: PathLike | None = None) -> Any:
    """`xstage plan attn --json`: the attention epilogue All-to-All audit (None: the CLI's default; `xstage plan
    attn --help` describes each: block_m b_m, head_dim d, block_n b_n, sigma_us, seq a list of lengths, ...)."""
    return _planner_call("plan_attn", producers=producers, block_m=block_m, head_dim=head_dim, block_n=block_n,
                         out_bytes=out_bytes, sigma_us=sigma_us, qk_cover_us=qk_cover_us, latency_us=latency_us,
                         cover_us=cover_us, seq=_int_list(seq), heads_per_gpu=heads_per_gpu,
                         batch=batch, platform=platform)


def plan_moe(*, kernel: PathLike | None = None, shape: str | None = None, hidden: Integral | None = None,
             h_inter: Integral | None = None, experts: Integral | None = None, top_k: Integral | None = None,
             precision: str | None = None, sm_tflops: Real | None = None, t_l1_us: Real | None = None,
             t_l2_us: Real | None = None, block_m: Integral | None = None, block_n: Integral | None = None,
             out_bytes: Integral | None = None, staging_us: Real | None = None, tile_bytes: Real | None = None,
             n1: Real | None = None, n2: Real | None = None, simulate: bool = False, ranks: Integral | None = None,
             tokens: Integral | None = None, routing: PathLike | None = None, zipf_s: Real | None = None,
             lead_rows: Integral | None = None, experts_per_wave: Integral | None = None,
             combine: str | None = None, cover_slots: Integral | None = None, trace: PathLike | None = None,
             force: bool = False, producers: Integral | None = None, platform: PathLike | None = None) -> Any:
    """`xstage plan moe --json`: the MoE Combine audit of a kernel description (`kernel`: a built-in name or an
    xstage.kernel/1 file; `shape` a built-in by name) or of the tile-level form (tile_bytes, n1, n2, ...);
    `simulate=True` simulates both tile orders for one routing (ranks, tokens, routing "balanced", "skewed" or a
    file). None: the CLI's default; `xstage plan moe --help` describes each. `trace` (with `force`) also writes
    both orders' simulated timelines as a Chrome trace: that runs the CLI."""
    if trace is None and not force:
        return _planner_call("plan_moe", kernel=kernel, shape=shape, hidden=hidden, h_inter=h_inter,
                             experts=experts, top_k=top_k, precision=precision, sm_tflops=sm_tflops,
                             t_l1_us=t_l1_us, t_l2_us=t_l2_us, block_m=block_m, block_n=block_n,
                             out_bytes=out_bytes, staging_us=staging_us, tile_bytes=tile_bytes, n1=n1, n2=n2,
                             simulate=simulate, ranks=ranks, tokens=tokens, routing=routing, zipf_s=zipf_s,
                             lead_rows=lead_rows, experts_per_wave=experts_per_wave, combine=combine,
                             cover_slots=cover_slots, producers=producers, platform=platform)
    return run_json(["plan", "moe"], kernel=kernel, shape=shape, hidden=hidden, h_inter=h_inter, experts=experts,
                    top_k=top_k, precision=precision, sm_tflops=sm_tflops, t_l1_us=t_l1_us, t_l2_us=t_l2_us,
                    block_m=block_m, block_n=block_n, out_bytes=out_bytes, staging_us=staging_us,
                    tile_bytes=tile_bytes, n1=n1, n2=n2, simulate=simulate, ranks=ranks, tokens=tokens,
                    routing=routing, zipf_s=zipf_s, lead_rows=lead_rows, experts_per_wave=experts_per_wave,
                    combine=combine, cover_slots=cover_slots, trace=trace, force=force, producers=producers,
                    platform=platform)


def simulate(*, producers: Integral | None = None, bytes_per_producer: Real | None = None,
             gap_us: Real | None = None, bursts: Integral | None = None, t_iss0_us: Real | None = None,
             capacity_bytes: Real | None = None, completion_coupled: bool = False, latency_us: Real | None = None,
             per_burst: bool = False, schedule: PathLike | None = None, kernel: PathLike | None = None,
             trace: PathLike | None = None, force: bool = False, platform: PathLike | None = None) -> Any:
    """`xstage simulate --json`: event simulation of periodic bursts (producers, bytes_per_producer, gap_us,
    bursts, completion_coupled=True, ...), of a schedule file (`schedule`) or of a burst-gap kernel description
    (`kernel`, xstage.kernel/1 kind "burst_gap": per tile kind the stalls and the design test); the three are
    exclusive. `trace` (with `force`) also writes the timeline as a Chrome trace: that runs the CLI."""
    if trace is None and not force:
        return _planner_call("simulate", producers=producers, bytes_per_producer=bytes_per_producer, gap_us=gap_us,
                             bursts=bursts, t_iss0_us=t_iss0_us, capacity_bytes=capacity_bytes,
                             completion_coupled=completion_coupled, latency_us=latency_us, per_burst=per_burst,
                             schedule=schedule, kernel=kernel, platform=platform)
    return run_json(["simulate"], producers=producers, bytes_per_producer=bytes_per_producer, gap_us=gap_us,
                    bursts=bursts, t_iss0_us=t_iss0_us, capacity_bytes=capacity_bytes,
                    completion_coupled=completion_coupled, latency_us=latency_us, per_burst=per_burst,
                    schedule=schedule, kernel=kernel, trace=trace, force=force, platform=platform)


def fit(*, records: PathLike, raw: PathLike | None = None, name: str | None = None, link_gbps: Real | None = None,
        link_source: str | None = None, copy_engine_gbps: Real | None = None, sms: Integral | None = None,
        out: PathLike | None = None, force: bool = False) -> Any:
    """`xstage fit --json`: the platform (R, T_iss0, Q) fitted from calibration records (`records`: xstage calibrate's
    records.csv; `raw` its raw.json, the zero-gap records' measured loop gaps), named `name` (default "fitted");
    `link_gbps` (with `link_source`, and optionally `copy_engine_gbps` and `sms`) fits under the link's rate and
    writes these physical bounds. The result's "out" is None and its "platform" the fitted xstage.platform/1
    document. With `out` (and `force`) the CLI fits and writes that document to the file: the result is then the
    CLI's JSON, "out" the path and no "platform"."""
    if out is None and not force:
        return _planner_call("fit", records=records, raw=raw, name=name, link_gbps=link_gbps,
                             link_source=link_source, copy_engine_gbps=copy_engine_gbps, sms=sms)
    return run_json(["fit"], records=records, raw=raw, out=out, name=name, link_gbps=link_gbps,
                    link_source=link_source, copy_engine_gbps=copy_engine_gbps, sms=sms, force=force)


def fidelity(*, records: PathLike, raw: PathLike | None = None, platform: PathLike | None = None,
             traces: PathLike | Sequence[PathLike] | None = None, ulysses: PathLike | None = None,
             cross_validate: bool = False, folds: Integral | None = None, out: PathLike | None = None,
             force: bool = False) -> Any:
    """`xstage fidelity --json`: every calibration record (`records`, with `raw` its raw.json) predicted by the
    closed form and the simulator of `platform` against its measurement; `traces` (one traced MoE bench file or a
    list) adds eq. 15 per tile, `ulysses` (a Ulysses sweep file) the predicted vs measured residual;
    `cross_validate=True` refits on part of the records and predicts the rest (`folds`: 2..10, default 2). The
    result's "provenance" holds the version and the files read. `out` (with `force`) also writes the report to a
    file: that runs the CLI, whose provenance adds its command line and the build's git revision."""
    if out is None and not force:
        return _planner_call("fidelity", records=records, raw=raw, platform=platform, traces=_path_list(traces),
                             ulysses=ulysses, cross_validate=cross_validate, folds=folds)
    return run_json(["fidelity"], records=records, raw=raw, platform=platform, traces=_path_list(traces),
                    ulysses=ulysses, cross_validate=cross_validate, folds=folds, out=out, force=force)
