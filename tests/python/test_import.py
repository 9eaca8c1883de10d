"""The package imports without torch and without a GPU; its native library loads and exports only the C ABI."""

from __future__ import annotations

import os
import subprocess
import sys

import xstage
from xstage import _native


def test_import_without_torch():
    # torch made unimportable: `import xstage`, the planner and the DLPack entry point still work.
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import xstage, xstage.planner\n"
        "print(xstage.__version__, xstage.has_cuda() in (True, False))\n"
        "try:\n"
        "    xstage.attention([1], [1], [1])\n"
        "except TypeError as e:\n"
        "    print('TypeError', e)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"{xstage.__version__} True"
    assert lines[1].startswith("TypeError xstage.attention: q is a list")
    assert "torch is not installed" in lines[1]


def test_library_version_and_build():
    lib = _native.lib()
    assert lib.xstage_c_api_version() == _native.C_API_VERSION
    info = xstage.build_info()
    assert info.startswith(xstage.__version__)
    assert ("cuda" in info) == xstage.has_cuda()


def test_library_exports_only_the_c_abi():
    # Static CUDA runtime and C++ helpers stay local to the library (never bound by torch's copies).
    path = _native.library_path()
    result = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    names = [line.split()[-1] for line in result.stdout.splitlines() if line.strip()]
    assert names, "no exported symbols"
    assert [n for n in names if not n.startswith("xstage_")] == []
    for required in ("xstage_attention_forward", "xstage_last_error", "xstage_free", "xstage_planner_model"):
        assert required in names
    # The command line is a library of its own above this one (the C ABI links neither the CLI nor the bench code).
    assert [n for n in names if n.startswith("xstage_cli_")] == []


def test_cli_library_exports_only_its_c_abi():
    path = _native.cli_library_path()
    result = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    names = sorted(line.split()[-1] for line in result.stdout.splitlines() if line.strip())
    assert names == ["xstage_cli_c_api_version", "xstage_cli_free", "xstage_cli_run"]
    assert _native.cli_lib().xstage_cli_c_api_version() == _native.CLI_C_API_VERSION


def test_last_error_is_empty_after_success():
    assert _native.lib().xstage_c_api_version() == _native.C_API_VERSION
    out = __import__("ctypes").c_void_p()
    assert _native.lib().xstage_platform_json(None, __import__("ctypes").byref(out)) == _native.OK
    _native.lib().xstage_free(out)
    assert _native.last_error() == ""


def test_a_wrong_library_under_the_cli_path_is_a_clear_error(tmp_path):
    # The console script with XSTAGE_CLI_LIBRARY naming another library (here the C ABI's): exit 1, one line, no
    # traceback.
    env = dict(os.environ, XSTAGE_CLI_LIBRARY=_native.library_path())
    result = subprocess.run([sys.executable, "-m", "xstage", "--version"], capture_output=True, text=True, env=env,
                            timeout=120, cwd=tmp_path)
    assert result.returncode == 1
    assert "is not the library this package expects" in result.stderr
    assert "Traceback" not in result.stderr
