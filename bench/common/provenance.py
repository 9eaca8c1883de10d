"""Provenance and clock readings shared by the Python benchmarks (one home for each).

    sys.path.insert(0, <bench>/common); from provenance import provenance, PowerSampler

Every result JSON carries `provenance(...)`: git revision (XSTAGE_GIT_REVISION wins: the GPU machine has no
.git), date, command, host, device, driver, CUDA/cuDNN/NCCL versions as torch reports them, the SM clock
before the run, the xstage build when importable, and any package versions asked for. Nothing here fails a
benchmark: a reading that cannot be taken is recorded as None.
"""

from __future__ import annotations

import datetime
import hashlib
import importlib.metadata
import os
import platform
import shlex
import subprocess
import statistics
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def git_revision(given: str | None = None) -> str:
    """`given`, else $XSTAGE_GIT_REVISION, else the checkout's HEAD, else "unknown". A checkout with uncommitted changes
    to tracked files gives "<sha>-dirty.<first 12 hex digits of the SHA-256 of `git diff HEAD --binary`>", the string
    the build records (src/gpu/git_revision.cmake)."""
    if given:
        return given
    if os.environ.get("XSTAGE_GIT_REVISION"):
        return os.environ["XSTAGE_GIT_REVISION"]
    try:
        rev = subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True, text=True,
                             check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True, timeout=10).stdout.strip()
        if not dirty:
            return rev
        diff = subprocess.run(["git", "-C", REPO, "diff", "HEAD", "--binary"], capture_output=True, check=True,
                              timeout=30).stdout
        return f"{rev}-dirty.{hashlib.sha256(diff).hexdigest()[:12]}"
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
    # One nvidia-smi call for the four card readings (each as nvidia-smi prints it, units included).
    smi = (nvidia_smi_field("driver_version,clocks.sm,clocks.max.sm,power.limit", device) or "").split(", ")
    smi = smi if len(smi) == 4 else [None] * 4
    try:
        clock = float(smi[1].split()[0]) if smi[1] else None
    except ValueError:
        clock = None
    doc = {
        "git_revision": git_revision(git_revision_given),
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(shlex.quote(a) for a in ([sys.executable, *sys.argv] if argv is None else argv)),
        "host": platform.node(),
        "python": sys.version.split()[0],
        "nvidia_driver": smi[0],
        "sm_clock_mhz_start": clock,
        "max_sm_clock_mhz": smi[2],
        "power_limit": smi[3],
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


class PowerSampler:
    """SM clock (MHz) and board power (W) of GPU 0, sampled by one `nvidia-smi -lms` child for the whole
    run; `window(t0, t1)` summarizes the samples whose nvidia-smi timestamps fall in [t0, t1] (epoch s).

    An H200 running attention sits at its 700 W board limit and its SM clock falls from ~1980 to ~1650 MHz,
    so a TFLOP/s figure is read with the clock and power of its own timed loop."""

    def __init__(self, period_ms=10):
        self.samples = []  # (epoch seconds, clock MHz, power W)
        self.error = None
        self.proc = None
        self.power_field = None
        for power in ("power.draw.instant", "power.draw"):
            probe = subprocess.run(["nvidia-smi", f"--query-gpu=clocks.sm,{power}", "--format=csv,noheader,nounits",
                                    "-i", "0"], capture_output=True, text=True, timeout=20) \
                if self._have_smi() else None
            if probe is not None and probe.returncode == 0 and "N/A" not in probe.stdout and "[" not in probe.stdout:
                self.power_field = power
                break
        if self.power_field is None:
            self.error = "nvidia-smi missing or it reports no clocks.sm / power.draw"
            return
        cmd = ["nvidia-smi", f"--query-gpu=timestamp,clocks.sm,{self.power_field}", "--format=csv,noheader,nounits",
               "-i", "0", f"-lms={period_ms}"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    @staticmethod
    def _have_smi():
        try:
            return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=20).returncode == 0
        except Exception:
            return False

    def _read(self):
        for line in self.proc.stdout:
            parts = [x.strip() for x in line.split(",")]
            if len(parts) != 3:
                continue
            try:
                t = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
                self.samples.append((t, float(parts[1]), float(parts[2])))
            except ValueError:
                continue

    def window(self, t0, t1, min_s=0.1):
        """A timed loop shorter than min_s gets its window stretched back into its warm-up (the same
        kernel back to back), so that it holds a few samples."""
        if self.error:
            return {"error": self.error}
        time.sleep(0.1)  # the sampler's last lines of the window arrive through a pipe
        t0 = min(t0, t1 - min_s)
        sel = [x for x in list(self.samples) if t0 <= x[0] <= t1]
        if not sel:
            return {"samples": 0, "window_s": t1 - t0}
        clk, pw = [x[1] for x in sel], [x[2] for x in sel]
        return {"samples": len(sel), "window_s": t1 - t0, "power_field": self.power_field,
                "sm_clock_mhz_median": statistics.median(clk), "sm_clock_mhz_min": min(clk),
                "sm_clock_mhz_max": max(clk), "power_w_median": statistics.median(pw), "power_w_max": max(pw)}

    def stop(self):
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
