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
    path = cli_path()
    if not path.is_file():
        pytest.fail(f"xstage CLI not found at {path}: build it (scripts/build.sh) or set XSTAGE_CLI")
    return path
