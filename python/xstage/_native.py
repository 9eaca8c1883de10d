"""Loader of libxstage_capi.so (the C ABI, include/xstage/c_api.h) and of libxstage_cli.so (the command line in
process, include/xstage/cli_c_api.h) through ctypes.

The library is plain C, so one wheel serves every Python 3 version. The CUDA runtime is linked into it statically
(it needs only the driver, libcuda.so.1, r580 or later for CUDA 13.0); NCCL is a shared library that the process
provides: the copy in the nvidia-nccl-cu13 wheel (the package's dependency, the one torch's CUDA 13 wheels install)
is loaded first when present, so that xstage and torch share one NCCL and
the library runs against the NCCL version it was compiled with rather than an older system copy; otherwise the
dynamic loader's search path is used. cuBLAS is no dependency: only `xstage moe bench`'s separate-kernel baseline uses
it, loading libcublas.so.13 on first use; the nvidia-cublas wheel (`xstage[bench]`) is preloaded when installed.
After loading, the NCCL found is checked against the one the library was
built with (same major version, minor at least the build's): an older one raises XstageLoadError naming both.
"""

from __future__ import annotations

import ctypes
import glob
import os
import struct
import threading
from typing import Callable, Sequence

C_API_VERSION = 3  # XSTAGE_C_API_VERSION
CLI_C_API_VERSION = 1  # XSTAGE_CLI_C_API_VERSION
PLANNER_C_API_VERSION = 5  # XSTAGE_PLANNER_C_API_VERSION

OK = 0
ERR_TYPE = 1
ERR_VALUE = 2
ERR_LAYOUT = 3
ERR_UNSUPPORTED = 4
ERR_CUDA = 5
ERR_INTERNAL = 6

_LIB_NAME = "libxstage_capi.so"
_CLI_LIB_NAME = "libxstage_cli.so"
_lock = threading.Lock()
_lib = None
_cli_lib = None


class XstageLoadError(ImportError):
    """libxstage_capi.so, libxstage_cli.so or a shared library either needs could not be loaded."""


# --- DLPack structures (dlpack.h, ABI stable since 0.5) ----------------------------------------
# DLTensor with its two small nested structs (DLDevice, DLDataType) flattened: the same bytes, but each
# field is set without a temporary sub-structure object, which keeps the per-call cost low.
class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device_type", ctypes.c_int32),  # DLDevice
        ("device_id", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("dtype_code", ctypes.c_uint8),  # DLDataType
        ("dtype_bits", ctypes.c_uint8),
        ("dtype_lanes", ctypes.c_uint16),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


assert ctypes.sizeof(DLTensor) == 48


class DLManagedTensor(ctypes.Structure):
    _fields_ = [
        ("dl_tensor", DLTensor),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
    ]


class TensorSlot:
    """A DLTensor with its own size and stride storage, refilled for each call (no allocation).

    The strides follow the sizes in `dims` (dims[0:ndim] sizes, dims[ndim:2 * ndim] strides), so one
    slice assignment fills both; dtype, device and rank are rewritten only when they change.
    """

    MAX_NDIM = 8
    __slots__ = ("dl", "dims", "address", "ndim", "dtype", "device", "pack")
    # pack(dims, 0, *sizes, *strides) for each rank: struct.pack_into writes all 2*ndim values in one call,
    # several times faster than a ctypes slice assignment (one conversion per element).
    _PACKERS = tuple(struct.Struct(f"={2 * n}q").pack_into for n in range(MAX_NDIM + 1))

    def __init__(self) -> None:
        self.dl = DLTensor()
        self.dims = (ctypes.c_int64 * (2 * self.MAX_NDIM))()
        self.dl.shape = ctypes.cast(ctypes.addressof(self.dims), ctypes.POINTER(ctypes.c_int64))
        self.dl.dtype_lanes = 1
        self.address = ctypes.addressof(self.dl)
        self.ndim = -1
        self.dtype = None
        self.device = None
        self.set_ndim(0)

    def set_ndim(self, n: int) -> None:
        self.dl.ndim = n
        self.dl.strides = ctypes.cast(ctypes.addressof(self.dims) + 8 * n, ctypes.POINTER(ctypes.c_int64))
        self.ndim = n
        self.pack = self._PACKERS[n]

    def set_dims(self, shape: Sequence[int], strides: Sequence[int]) -> None:
        n = len(shape)
        if n != self.ndim:
            self.set_ndim(n)
        self.pack(self.dims, 0, *shape, *strides)


class AttentionCall(ctypes.Structure):
    """xstage_attention_call: pointers to five slots, the scale, the stream, the precision and the workspace's
    slot (c_api.h states the layout; tests/python/test_attention_checks.py compares it)."""
    _fields_ = [
        ("q", ctypes.c_void_p),
        ("k", ctypes.c_void_p),
        ("v", ctypes.c_void_p),
        ("out", ctypes.c_void_p),
        ("lse", ctypes.c_void_p),
        ("softmax_scale", ctypes.c_float),
        ("stream", ctypes.c_void_p),
        ("precision", ctypes.c_int),  # PRECISIONS
        ("workspace", ctypes.c_void_p),
    ]


# XSTAGE_ATTN_PRECISION_*: the names the Python API takes, and their values in the C ABI.
PRECISIONS = {"bf16": 0, "fp8": 1}


KDL_CPU = 1
KDL_CUDA = 2
KDL_INT = 0
KDL_UINT = 1
KDL_FLOAT = 2
KDL_BFLOAT = 4

# Entry points take tensors as addresses (ints): a slot's address is computed once.
DLTensorPtr = ctypes.c_void_p


def _package_dir() -> str:
    return os.path.dirname(os.path.abspath(__file__))


def _preload_from_wheel(module_name: str, patterns: list[str]) -> None:
    """dlopen (RTLD_GLOBAL) the libraries of an nvidia-* wheel, where that wheel is installed."""
    try:
        module = __import__(module_name, fromlist=["__path__"])
    except ImportError:
        return
    for root in list(getattr(module, "__path__", [])):
        for pattern in patterns:
            for path in sorted(glob.glob(os.path.join(root, "lib", pattern))):
                try:
                    ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                except OSError:
                    pass  # the system loader may still find a usable copy; the final load reports it


def library_path() -> str:
    """Path of the C ABI library: $XSTAGE_CAPI_LIBRARY, else the copy installed in the package."""
    return os.environ.get("XSTAGE_CAPI_LIBRARY") or os.path.join(_package_dir(), _LIB_NAME)


def cli_library_path() -> str:
    """Path of the command line's library: $XSTAGE_CLI_LIBRARY, else the copy installed in the package."""
    return os.environ.get("XSTAGE_CLI_LIBRARY") or os.path.join(_package_dir(), _CLI_LIB_NAME)


def _declare(lib: ctypes.CDLL) -> None:
    c_int, c_float, c_char_p, c_void_p = ctypes.c_int, ctypes.c_float, ctypes.c_char_p, ctypes.c_void_p
    lib.xstage_c_api_version.restype = c_int
    lib.xstage_c_api_version.argtypes = []
    lib.xstage_has_cuda.restype = c_int
    lib.xstage_has_cuda.argtypes = []
    lib.xstage_build_info.restype = c_char_p
    lib.xstage_build_info.argtypes = []
    lib.xstage_last_error.restype = c_char_p
    lib.xstage_last_error.argtypes = []
    lib.xstage_free.restype = None
    lib.xstage_free.argtypes = [c_void_p]
    lib.xstage_attention_forward.restype = c_int
    lib.xstage_attention_forward.argtypes = [DLTensorPtr, DLTensorPtr, DLTensorPtr, DLTensorPtr, DLTensorPtr,
                                             c_float, c_void_p]
    lib.xstage_attention_forward_call.restype = c_int
    lib.xstage_attention_forward_call.argtypes = [c_void_p]
    lib.xstage_attention_check_call.restype = c_int
    lib.xstage_attention_check_call.argtypes = [c_void_p]
    lib.xstage_attention_workspace_bytes.restype = c_int
    lib.xstage_attention_workspace_bytes.argtypes = [DLTensorPtr, DLTensorPtr, c_int, ctypes.POINTER(ctypes.c_uint64)]
    lib.xstage_attention_check.restype = c_int
    lib.xstage_attention_check.argtypes = [DLTensorPtr, DLTensorPtr, DLTensorPtr, DLTensorPtr, DLTensorPtr, c_float]
    lib.xstage_attention_view_check.restype = c_int
    lib.xstage_attention_view_check.argtypes = [DLTensorPtr, c_char_p]
    lib.xstage_platform_json.restype = c_int
    lib.xstage_platform_json.argtypes = [c_char_p, ctypes.POINTER(c_void_p)]
    # the planner's typed C ABI (include/xstage/planner/planner_c_api.h)
    lib.xstage_planner_c_api_version.restype = c_int
    lib.xstage_planner_c_api_version.argtypes = []
    for command in ("model", "simulate", "plan", "plan_attn", "plan_moe", "fit", "fidelity"):
        entry = getattr(lib, "xstage_planner_" + command)
        entry.restype = c_int
        entry.argtypes = [c_char_p, ctypes.POINTER(c_void_p), ctypes.POINTER(c_void_p)]
    lib.xstage_planner_free.restype = None
    lib.xstage_planner_free.argtypes = [c_void_p]


def _declare_cli(lib: ctypes.CDLL) -> None:
    c_int, c_char_p, c_void_p = ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p
    lib.xstage_cli_c_api_version.restype = c_int
    lib.xstage_cli_c_api_version.argtypes = []
    lib.xstage_cli_run.restype = c_int
    lib.xstage_cli_run.argtypes = [c_int, ctypes.POINTER(c_char_p), ctypes.POINTER(c_void_p),
                                   ctypes.POINTER(c_void_p)]
    lib.xstage_cli_free.restype = None
    lib.xstage_cli_free.argtypes = [c_void_p]


def _open(path: str) -> ctypes.CDLL:
    """dlopen `path` after the NVIDIA wheels' NCCL and cuBLAS (see the module's docstring)."""
    if not os.path.exists(path):
        raise XstageLoadError(f"xstage: {path} not found: the package was not built "
                              "(install it with `pip install .` from the xstage source tree)")
    _preload_from_wheel("nvidia.nccl", ["libnccl.so*"])
    # CUDA 12 wheels: nvidia/cublas/lib; CUDA 13 wheels: nvidia/cu13/lib
    _preload_from_wheel("nvidia.cublas", ["libcublasLt.so*", "libcublas.so*"])
    _preload_from_wheel("nvidia.cu13", ["libcublasLt.so.13*", "libcublas.so.13*"])
    try:
        return ctypes.CDLL(path)
    except OSError as e:
        hint = ""
        if "nccl" in str(e):
            hint = (" (NCCL comes from the process: install torch with CUDA, or the nvidia-nccl-cu13 wheel, or put its"
                    " lib folder on LD_LIBRARY_PATH)")
        raise XstageLoadError(f"xstage: cannot load {path}: {e}{hint}") from e


def _load(path: str, declare: Callable[[ctypes.CDLL], None], version_fn: str, expected: int, what: str) -> ctypes.CDLL:
    """dlopen `path` (_open), declare its entry points and refuse a library whose `version_fn` differs."""
    loaded = _open(path)
    try:
        declare(loaded)
    except AttributeError as e:  # another library (an older xstage, or not xstage) under that path
        raise XstageLoadError(f"xstage: {path} is not the library this package expects: {e}") from None
    version = getattr(loaded, version_fn)()
    if version != expected:
        raise XstageLoadError(f"xstage: {path} has {what} version {version}, this package expects {expected}")
    return loaded


def lib() -> ctypes.CDLL:
    """The loaded library (loaded on first use, so `import xstage` never fails for want of it)."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            loaded = _load(library_path(), _declare, "xstage_c_api_version", C_API_VERSION, "C API")
            planner = loaded.xstage_planner_c_api_version()
            if planner != PLANNER_C_API_VERSION:
                raise XstageLoadError(f"xstage: {library_path()} has planner C API version {planner}, this package "
                                      f"expects {PLANNER_C_API_VERSION}")
            check_nccl(loaded.xstage_build_info().decode("utf-8", "replace"))
            _lib = loaded
        return _lib


def cli_lib() -> ctypes.CDLL:
    """The command line's library (loaded on first use of the console script or xstage.planner.run)."""
    global _cli_lib
    if _cli_lib is not None:
        return _cli_lib
    lib()  # the NCCL check and the kernels' library first: both libraries then run against the same NCCL
    with _lock:
        if _cli_lib is None:
            _cli_lib = _load(cli_library_path(), _declare_cli, "xstage_cli_c_api_version", CLI_C_API_VERSION,
                             "CLI C API")
        return _cli_lib


def _loaded_path(soname_prefix: str) -> str:
    """Where the process loaded a shared library from (its first mapping in /proc/self/maps), or ''."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rsplit(" ", 1)[-1].strip()
                if os.path.basename(path).startswith(soname_prefix):
                    return path
    except OSError:
        pass
    return ""


def nccl_version() -> tuple[int, int, int] | None:
    """(major, minor, patch) of the NCCL the process has loaded (ncclGetVersion), None if none is loaded."""
    try:
        nccl = ctypes.CDLL("libnccl.so.2", mode=os.RTLD_NOLOAD | os.RTLD_NOW)
    except OSError:
        return None
    code = ctypes.c_int()
    if nccl.ncclGetVersion(ctypes.byref(code)) != 0:
        return None
    v = code.value  # NCCL_VERSION(X, Y, Z): X * 10000 + Y * 100 + Z from 2.9 on
    return (v // 10000, (v // 100) % 100, v % 100)


def check_nccl(build_info_text: str) -> None:
    """Raises XstageLoadError if the loaded NCCL is older than (or of another major version than) the build's,
    as build_info_text's "NCCL: X.Y.Z" line states; a build without NCCL, or no NCCL loaded, passes."""
    built = None
    for line in build_info_text.splitlines():
        if line.startswith("NCCL:"):
            parts = line.split(":", 1)[1].strip().split(".")
            if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
                built = (int(parts[0]), int(parts[1]))
    found = nccl_version()
    if built is None or found is None:
        return
    if found[0] != built[0] or found[1] < built[1]:
        where = _loaded_path("libnccl.so") or "the dynamic loader's search path"
        raise XstageLoadError(
            f"xstage: NCCL {found[0]}.{found[1]}.{found[2]} loaded from {where}, but xstage was built with NCCL "
            f"{built[0]}.{built[1]}: install a matching one (pip install 'nvidia-nccl-cu13>={built[0]}.{built[1]}', "
            f"which xstage loads before the system's) or put a newer libnccl.so.2 on LD_LIBRARY_PATH")


def last_error() -> str:
    return lib().xstage_last_error().decode("utf-8", "replace")


def raise_for(status: int, where: str) -> None:
    """Raises the Python exception of a failed call (the message comes from the library)."""
    message = f"{where}: {last_error()}"
    if status == ERR_TYPE:
        raise TypeError(message)
    if status in (ERR_VALUE, ERR_LAYOUT):
        raise ValueError(message)
    raise RuntimeError(message)


def has_cuda() -> bool:
    """True when the kernels are built in (nvcc was present when the package was built)."""
    return bool(lib().xstage_has_cuda())


def build_info() -> str:
    return lib().xstage_build_info().decode()
