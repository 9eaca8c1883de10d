"""The `xstage` console script of the installed package and `python -m xstage`: the CLI's commands, output and
exit codes, run in process through the C ABI."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

import xstage
from conftest import cli_path


def _console_script() -> pathlib.Path:
    script = pathlib.Path(sys.executable).parent / "xstage"
    if not script.is_file():
        pytest.skip(f"no console script at {script}: the package is not installed in this environment")
    return script


def _run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("how", ["console script", "python -m xstage"])
def test_version_and_plan(how):
    prefix = [str(_console_script())] if how == "console script" else [sys.executable, "-m", "xstage"]
    version = _run(*prefix, "--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith(f"xstage {xstage.__version__}\n")
    plan = _run(*prefix, "plan")
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.startswith("xstage plan: design test of built-in workloads")


def test_bad_input_exits_2_with_the_cli_message():
    result = _run(sys.executable, "-m", "xstage", "model")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines()[-1] == "xstage: error: --producers is required"


def test_same_output_as_the_built_cli():
    cli = cli_path()
    if not cli.is_file():
        pytest.skip(f"no built CLI at {cli}")
    args = ["model", "--producers", "132", "--bytes-per-producer", "32768", "--gap-us", "2.5", "--json"]
    ours, theirs = _run(sys.executable, "-m", "xstage", *args), _run(str(cli), *args)
    assert (ours.returncode, ours.stdout) == (theirs.returncode, theirs.stdout)


def test_main_returns_the_exit_code(capsys):
    from xstage.__main__ import main
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("xstage ")
    assert main(["model", "--producers", "x"]) == 2
