"""Shared fixtures of the Python package's tests (CPU tests run anywhere; GPU tests skip without one)."""

from __future__ import annotations

import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


def cli_path() -> pathlib.Path:
    """The xstage CLI binary: $XSTAGE_CLI, else build/xstage of this checkout."""
    return pathlib.Path(os.environ.get("XSTAGE_CLI") or REPO / "build" / "xstage")


@pytest.fixture(scope="session")
def cli() -> pathlib.Path:
    """Missing CLI: a failure under CI (CI=true, where the build provides it), else a skip (e.g. a GPU
    machine given only the wheel), so those runs stay clean."""
    path = cli_path()
    if not path.is_file():
        message = f"xstage CLI not found at {path}: build it (scripts/build.sh) or set XSTAGE_CLI"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + " (CI=true: the CLI is required)")
        pytest.skip(message)
    return path
