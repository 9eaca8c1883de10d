"""bench/common/headline_medians.py: the median over runs, and a backend that served none of its calls left out."""
import importlib.util
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("headline_medians", ROOT / "bench/common/headline_medians.py")
hm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hm)


def _run(tmp_path, name, medians, routed):
    d = tmp_path / name / "python"
    d.mkdir(parents=True)
    rows = [{"impl": k, "median_ms": v, "routing": {"routed": routed.get(k, 1), "fallback_total": 0}}
            for k, v in medians.items()]
    (d / "wan_e2e.json").write_text(json.dumps({"rows": rows, "summary": {"median_ms": medians}}))
    return str(tmp_path / name)


def test_wan_medians_over_runs_leave_out_unrouted_backends(tmp_path):
    r1 = _run(tmp_path, "r1", {"xstage": 550.0, "xstage_sdpa": 560.0, "cudnn": 640.0}, {})
    r2 = _run(tmp_path, "r2", {"xstage": 554.0, "xstage_sdpa": 641.0, "cudnn": 642.0}, {"xstage_sdpa": 0})
    r3 = _run(tmp_path, "r3", {"xstage": 552.0, "xstage_sdpa": 562.0, "cudnn": 644.0}, {})
    got = hm.wan([r1, r2, r3])
    assert got["xstage"] == 552.0
    assert got["cudnn"] == 642.0
    assert got["xstage_sdpa"] == 561.0   # r2's figure was another kernel's: the median of r1 and r3


def test_a_run_without_the_file_is_skipped(tmp_path):
    r1 = _run(tmp_path, "r1", {"xstage": 550.0}, {})
    (tmp_path / "empty").mkdir()
    assert hm.wan([r1, str(tmp_path / "empty")]) == {"xstage": 550.0}
