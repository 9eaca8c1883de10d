"""bench/python/wan_e2e.py on the CPU: its token arithmetic, and every step of a run (routing, agreement, timing
rounds, JSON, plot) at toy sizes with CPU attention kernels standing in for xstage and FlashAttention-4."""
import json
import pathlib
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "python"))
import wan_e2e  # noqa: E402
import xstage.integrations.diffusers as xd  # noqa: E402


@pytest.fixture(autouse=True)
def keep_active_backend():
    """set_attention_backend also sets diffusers' process-wide active backend: restore it after each test."""
    from diffusers.models.attention_dispatch import _AttentionBackendRegistry
    saved = _AttentionBackendRegistry._active_backend
    yield
    _AttentionBackendRegistry._active_backend = saved


def test_720p_81_frames_is_75600_tokens():
    assert wan_e2e.latent_grid(81, 720, 1280) == ((21, 90, 160), 75_600)
    assert wan_e2e.latent_grid(81, 480, 832) == ((21, 60, 104), 32_760)
    with pytest.raises(ValueError, match="--frames 80"):
        wan_e2e.latent_grid(80, 720, 1280)
    with pytest.raises(ValueError, match="--height 728"):
        wan_e2e.latent_grid(81, 728, 1280)


def cpu_kernel(name):
    def fn(q, k, v, scale):
        out = torch.nn.functional.scaled_dot_product_attention(*(t.transpose(1, 2).float() for t in (q, k, v)),
                                                               scale=scale)
        return out.transpose(1, 2).to(q.dtype)
    return xd.AttentionKernel(name, fn, "cpu", (torch.bfloat16,), (128,))


def test_a_toy_run_writes_json_and_plot(tmp_path, monkeypatch):
    monkeypatch.setattr(xd, "xstage_kernel", lambda: cpu_kernel("xstage_stand_in"))
    monkeypatch.setattr(wan_e2e, "fa4_kernel", lambda: cpu_kernel("fa4_stand_in"))
    out = tmp_path / "wan.json"
    argv = ["--device", "cpu", "--impls", "xstage,fa4", "--blocks", "1", "--heads", "2", "--ffn-dim", "64",
            "--frames", "5", "--height", "64", "--width", "64", "--text-tokens", "8", "--iters", "3", "--warmup", "1",
            "--attn-iters", "2", "--out", str(out), "--git-revision", "abc"]
    pytest.importorskip("matplotlib")
    plot = tmp_path / "wan.png"
    assert wan_e2e.main(argv + ["--plot", str(plot)]) == 0
    r = json.loads(out.read_text())
    assert r["schema"] == "xstage.wan_e2e" and r["workload"]["video_tokens"] == 2 * 4 * 4
    assert [row["impl"] for row in r["rows"]] == ["xstage", "fa4"]
    for row in r["rows"]:
        assert len(row["samples_ms"]) == 3 and row["routing"]["routed"] == 2 and row["output_finite"]
        assert set(row["attention_only"]) == {"self", "cross"}
    assert r["agreement"]["xstage_vs_fa4"]["rel_l2"] < 1e-6   # the same computation twice
    assert r["summary"]["all_agree"] and r["summary"]["all_calls_routed"] and r["errors"] == {}
    assert r["provenance"]["git_revision"] == "abc" and r["provenance"]["diffusers"] == "0.42.1"
    assert plot.stat().st_size > 0


def test_bad_arguments_exit_with_the_argument_named(tmp_path):
    out = tmp_path / "x.json"
    for argv, word in ((["--impls", "xstage,sdpa"], "sdpa"), (["--iters", "0"], "--iters"),
                       (["--frames", "80"], "--frames 80")):
        with pytest.raises(SystemExit, match=word):
            wan_e2e.main(argv + ["--out", str(out)])
    assert not out.exists()
