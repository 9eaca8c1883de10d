"""Provenance and clock readings shared by the Python benchmarks (one home for each).

    sys.path.insert(0, <bench>/common); from provenance import provenance, ClockSampler

Every result JSON carries `provenance(...)`: git revision (XSTAGE_GIT_REVISION wins: the GPU machine has no
.git), date, command, host, device, driver, CUDA/cuDNN/NCCL versions as torch reports them, the SM clock
before the run, the xstage build when importable, and any package versions asked for. Nothing here fails a
benchmark: a reading that cannot be taken is recorded as None.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import shlex
import subprocess
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def git_revision(given: str | None = None) -> str:
    """`given`, else $XSTAGE_GIT_REVISION, else the checkout's HEAD (with -dirty), else "unknown"."""
    if given:
        return given
    if os.environ.get("XSTAGE_GIT_REVISION"):
        return os.environ["XSTAGE_GIT_REVISION"]
    try:
        rev = subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True, text=True,
                             check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True, timeout=10).stdout.strip()
        return rev + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def nvidia_smi_field(field: str, device: int = 0) -> str | None:
    """One nvidia-smi query field of `device` (with units, as nvidia-smi prints it), or None."""
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader", "-i", str(device)],
                             capture_output=True, text=True, check=True, timeout=20).stdout.strip()
        return out or None
    except (OSError, subprocess.SubprocessError):
        return None


def sm_clock_mhz(device: int = 0) -> float | None:
    v = nvidia_smi_field("clocks.sm", device)
    try:
        return float(v.split()[0]) if v else None
    except ValueError:
        return None


def dist_version(*names: str) -> str | None:
    """The installed version of the first distribution of `names` that is installed."""
    for n in names:
        try:
            return importlib.metadata.version(n)
        except importlib.metadata.PackageNotFoundError:
            pass
    return None


def provenance(torch=None, device: int = 0, git_revision_given: str | None = None,
               packages: tuple[str, ...] = (), argv: list[str] | None = None) -> dict:
    """The provenance block of a result JSON. `torch`: the imported module, when the benchmark uses it."""
    doc = {
        "git_revision": git_revision(git_revision_given),
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(shlex.quote(a) for a in ([sys.executable, *sys.argv] if argv is None else argv)),
        "host": platform.node(),
        "python": sys.version.split()[0],
        "nvidia_driver": nvidia_smi_field("driver_version", device),
        "sm_clock_mhz_start": sm_clock_mhz(device),
        "max_sm_clock_mhz": nvidia_smi_field("clocks.max.sm", device),
        "power_limit": nvidia_smi_field("power.limit", device),
    }
    if torch is not None:
        doc["torch"] = torch.__version__
        doc["torch_cuda"] = torch.version.cuda
        try:
            doc["cudnn"] = torch.backends.cudnn.version()
        except Exception:  # noqa: BLE001 - a build without cuDNN
            doc["cudnn"] = None
        try:
            doc["nccl"] = ".".join(str(x) for x in torch.cuda.nccl.version())
        except Exception:  # noqa: BLE001 - a build without NCCL
            doc["nccl"] = None
        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(device)
            doc["device"] = {"index": device, "name": props.name, "sms": props.multi_processor_count,
                             "capability": f"{props.major}.{props.minor}", "memory_bytes": props.total_memory}
    try:
        import xstage
        doc["xstage"] = {"version": xstage.__version__, "build": xstage.build_info()}
    except Exception as e:  # noqa: BLE001 - not installed, or its library does not load here
        doc["xstage"] = {"error": str(e).splitlines()[0] if str(e) else type(e).__name__}
    for p in packages:
        doc[p] = dist_version(p)
    return doc


class ClockSampler:
    """SM clock and board power of one GPU sampled by `nvidia-smi -lms` while a `with` block runs.

    The card is power limited during long attention runs (its SM clock falls from ~1980 to ~1530 MHz), so
    a TFLOP/s figure without the clock it ran at cannot be compared across runs; `summary()` gives the
    median, minimum and maximum of both over the block. nvidia-smi's power reading is an average over its
    own window: read it as the power level of the block, not per launch.
    """

    def __init__(self, device: int = 0, period_ms: int = 50):
        self.device, self.period_ms = device, period_ms
        self.samples: list[tuple[float, float | None, float | None]] = []  # (t_s, sm MHz, W)
        self._proc = None
        self._thread = None

    def __enter__(self):
        try:
            self._proc = subprocess.Popen(
                ["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits",
                 "-i", str(self.device), "-lms", str(self.period_ms)],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except OSError:
            self._proc = None
            return self
        t0 = time.monotonic()

        def read():
            for line in self._proc.stdout:
                parts = [p.strip() for p in line.split(",")]
                vals = []
                for p in parts[:2]:
                    try:
                        vals.append(float(p))
                    except ValueError:
                        vals.append(None)
                if len(vals) == 2:
                    self.samples.append((time.monotonic() - t0, vals[0], vals[1]))

        self._thread = threading.Thread(target=read, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
            self._thread.join(timeout=5)
        return False

    def summary(self) -> dict:
        def stats(xs):
            xs = sorted(x for x in xs if x is not None)
            if not xs:
                return None
            return {"median": xs[len(xs) // 2], "min": xs[0], "max": xs[-1], "n": len(xs)}
        return {"sm_clock_mhz": stats(s[1] for s in self.samples), "power_w": stats(s[2] for s in self.samples),
                "period_ms": self.period_ms}
