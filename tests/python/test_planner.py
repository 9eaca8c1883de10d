"""xstage.planner returns exactly the CLI's --json output for the same arguments, and bad arguments
raise ValueError with the CLI's one-line message (CPU only)."""

from __future__ import annotations

import json
import subprocess

import pytest

import xstage.planner as xp
from conftest import REPO


def cli_json(cli, *args):
    result = subprocess.run([str(cli), *args, "--json"], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def cli_error(cli, *args):
    result = subprocess.run([str(cli), *args, "--json"], capture_output=True, text=True, timeout=600)
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    return result.stderr.strip().splitlines()[-1]


PAPER = str(REPO / "platforms" / "paper_8gpu_148sm.json")

CASES = [  # (binding, kwargs, CLI arguments)
    (xp.model, dict(producers=148, bytes_per_producer=32768, gap_us=2),
     ["model", "--producers", "148", "--bytes-per-producer", "32768", "--gap-us", "2"]),
    (xp.model, dict(producers=132, bytes_per_producer=4096, gap_us=0.5, platform=PAPER),
     ["model", "--producers", "132", "--bytes-per-producer", "4096", "--gap-us", "0.5", "--platform", PAPER]),
    (xp.model, dict(producers=64, bytes_per_producer=65536, gap_us=1.25, capacity_bytes=1 << 21),
     ["model", "--producers", "64", "--bytes-per-producer", "65536", "--gap-us", "1.25", "--capacity-bytes",
      str(1 << 21)]),
    (xp.plan, dict(), ["plan"]),
    (xp.plan, dict(platform=PAPER), ["plan", "--platform", PAPER]),
    (xp.plan_attn, dict(producers=148, block_m=128, head_dim=128, block_n=128, sigma_us=0.79),
     ["plan", "attn", "--producers", "148", "--block-m", "128", "--head-dim", "128", "--block-n", "128",
      "--sigma-us", "0.79"]),
    (xp.plan_attn, dict(sigma_us=1.7, seq=[4096, 16384], heads_per_gpu=4, batch=2),
     ["plan", "attn", "--sigma-us", "1.7", "--seq", "4096", "16384", "--heads-per-gpu", "4", "--batch", "2"]),
    (xp.plan_moe, dict(shape="deepseek-v3"), ["plan", "moe", "--shape", "deepseek-v3"]),
    (xp.plan_moe, dict(shape="qwen3-235b-a22b", simulate=True, routing="skewed", ranks=2, tokens=1024),
     ["plan", "moe", "--shape", "qwen3-235b-a22b", "--simulate", "--routing", "skewed", "--ranks", "2",
      "--tokens", "1024"]),
    (xp.simulate, dict(producers=148, bytes_per_producer=32768, gap_us=2, bursts=50),
     ["simulate", "--producers", "148", "--bytes-per-producer", "32768", "--gap-us", "2", "--bursts", "50"]),
    (xp.simulate, dict(producers=132, bytes_per_producer=16384, gap_us=1, bursts=20, completion_coupled=True),
     ["simulate", "--producers", "132", "--bytes-per-producer", "16384", "--gap-us", "1", "--bursts", "20",
      "--completion-coupled"]),
]


@pytest.mark.parametrize("binding, kwargs, args", CASES, ids=lambda c: c.__name__ if callable(c) else None)
def test_binding_equals_cli_json(cli, binding, kwargs, args):
    assert binding(**kwargs) == cli_json(cli, *args)


def test_flags_mapping():
    assert xp.flags(gap_us=2, completion_coupled=True, t_iss0_us=None, simulate=False, seq=[1, 2]) == [
        "--gap-us", "2", "--completion-coupled", "--seq", "1", "2"]
    assert xp.flags(sigma_us=0.1) == ["--sigma-us", "0.1"]  # shortest text of the double


@pytest.mark.parametrize("kwargs, args", [
    (dict(producers=0, bytes_per_producer=32768, gap_us=2),
     ["model", "--producers", "0", "--bytes-per-producer", "32768", "--gap-us", "2"]),
    (dict(producers=148, bytes_per_producer=32768, gap_us=-1),
     ["model", "--producers", "148", "--bytes-per-producer", "32768", "--gap-us", "-1"]),
    (dict(producers=148, bytes_per_producer=32768, gap_us=2, platform="/nonexistent/platform.json"),
     ["model", "--producers", "148", "--bytes-per-producer", "32768", "--gap-us", "2", "--platform",
      "/nonexistent/platform.json"]),
    (dict(producers=148, bytes_per_producer=32768, gap_us=2, no_such_flag=1),
     ["model", "--producers", "148", "--bytes-per-producer", "32768", "--gap-us", "2", "--no-such-flag", "1"]),
])
def test_bad_arguments_raise_the_cli_message(cli, kwargs, args):
    expected = cli_error(cli, *args)
    with pytest.raises(ValueError) as info:
        xp.model(**kwargs)
    assert str(info.value) == expected


def test_bad_plan_moe_shape(cli):
    expected = cli_error(cli, "plan", "moe", "--shape", "no-such-model")
    with pytest.raises(ValueError) as info:
        xp.plan_moe(shape="no-such-model")
    assert str(info.value) == expected


def test_non_finite_float_is_rejected_before_the_cli():
    with pytest.raises(ValueError, match="gap_us: nan"):
        xp.model(producers=1, bytes_per_producer=1, gap_us=float("nan"))


def test_load_platform_default_and_file(tmp_path):
    default = xp.load_platform()
    assert default["schema"] == "xstage.platform/1"
    assert xp.load_platform(REPO / "platforms" / "h200_x2_measured.json") == default  # the embedded one
    paper = xp.load_platform(PAPER)
    assert paper != default and paper["schema"] == "xstage.platform/1"
    bad = tmp_path / "bad.json"
    bad.write_text("{\"schema\": \"xstage.platform/1\"")
    with pytest.raises(ValueError, match=str(bad)):
        xp.load_platform(bad)
    with pytest.raises(ValueError, match="cannot open platform file"):
        xp.load_platform(tmp_path / "missing.json")


def test_run_returns_text(cli):
    text = xp.run("model", "--producers", "148", "--bytes-per-producer", "32768", "--gap-us", "2")
    result = subprocess.run([str(cli), "model", "--producers", "148", "--bytes-per-producer", "32768", "--gap-us",
                             "2"], capture_output=True, text=True, timeout=60)
    assert text == result.stdout
