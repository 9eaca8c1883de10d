"""xstage.planner returns exactly the CLI's --json output for the same arguments, and bad arguments
raise ValueError with the CLI's one-line message (CPU only)."""

from __future__ import annotations

import inspect
import json
import re
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
    (xp.simulate, dict(kernel=str(REPO / "kernels" / "burst_gap" / "gemm-reduce-scatter.json")),
     ["simulate", "--kernel", str(REPO / "kernels" / "burst_gap" / "gemm-reduce-scatter.json")]),
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
])
def test_bad_arguments_raise_the_cli_message_in_python_names(cli, kwargs, args):
    expected = cli_error(cli, *args)
    for name in kwargs:
        expected = expected.replace("--" + name.replace("_", "-"), name)
    with pytest.raises(ValueError) as info:
        xp.model(**kwargs)
    assert str(info.value) == expected
    assert "--" not in str(info.value)


@pytest.mark.parametrize("function, kwargs, args", [
    (xp.plan, dict(producers=0), ["plan", "--producers", "0"]),
    (xp.plan_attn, dict(block_m=0), ["plan", "attn", "--block-m", "0"]),
    (xp.plan_attn, dict(seq=[8192, 0]), ["plan", "attn", "--seq", "8192", "0"]),
    (xp.plan_attn, dict(heads_per_gpu=65536, seq=[67108864], block_m=1, batch=2147483647),
     ["plan", "attn", "--heads-per-gpu", "65536", "--seq", "67108864", "--block-m", "1", "--batch", "2147483647"]),
])
def test_plan_bad_arguments_raise_the_cli_message_in_python_names(cli, function, kwargs, args):
    # plan and plan_attn go through the planner's typed C ABI: the same message as the CLI's, keys for flags.
    expected = cli_error(cli, *args)
    for name in kwargs:
        expected = expected.replace("--" + name.replace("_", "-"), name)
    with pytest.raises(ValueError) as info:
        function(**kwargs)
    assert str(info.value) == expected
    assert "--" not in str(info.value)


def test_plan_attn_seq_takes_one_length_or_a_sequence():
    one = xp.plan_attn(seq=16384)
    assert one == xp.plan_attn(seq=[16384]) == xp.plan_attn(seq=(16384,))
    assert [p["seq_len"] for p in one["points"]] == [16384]
    assert xp.plan_attn(seq=[]) == xp.plan_attn()  # empty: the default lengths, as the CLI without --seq
    with pytest.raises(ValueError, match="^xstage: error: producers: must be a decimal integer"):
        xp.plan(producers="3")  # typed: a number, not its text


def test_keyword_typo_is_a_type_error_naming_it():
    with pytest.raises(TypeError, match="no_such_flag"):
        xp.model(producers=148, bytes_per_producer=32768, gap_us=2, no_such_flag=1)
    with pytest.raises(TypeError, match="gap_uss"):
        xp.simulate(producers=148, bytes_per_producer=32768, gap_uss=2)


def test_missing_required_keyword_named_in_python():
    with pytest.raises(ValueError, match="^xstage: error: producers is required") as info:
        xp.run_json(["model"], producers=None, bytes_per_producer=1)
    assert "--producers" not in str(info.value)


def test_numpy_numbers_are_accepted():
    np = pytest.importorskip("numpy")
    ref = xp.model(producers=132, bytes_per_producer=32768, gap_us=2.5)
    assert xp.model(producers=np.int64(132), bytes_per_producer=np.float64(32768), gap_us=np.float64(2.5)) == ref
    assert xp.model(producers=np.int32(132), bytes_per_producer=np.float32(32768), gap_us=np.float32(2.5)) == ref
    assert xp.flags(gap_us=np.float64(0.1), seq=[np.int64(4096)]) == ["--gap-us", "0.1", "--seq", "4096"]
    with pytest.raises(TypeError, match="gap_us is a dict"):
        xp.model(producers=1, bytes_per_producer=1, gap_us={})


def _comma_locale():
    import locale
    import os
    import subprocess
    for name in ("de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8"):
        try:
            locale.setlocale(locale.LC_NUMERIC, name)
            return name, None
        except locale.Error:
            pass
    # A private copy of de_DE (glibc's localedef), where the system has none installed.
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"xstage-locale-{os.getuid()}")
    try:
        os.makedirs(path, exist_ok=True)
        subprocess.run(["localedef", "-i", "de_DE", "-f", "UTF-8", os.path.join(path, "de_DE.UTF-8")],
                       capture_output=True, timeout=120, check=False)
    except OSError:
        return None, None
    if os.path.isdir(os.path.join(path, "de_DE.UTF-8")):
        return "de_DE.UTF-8", path
    return None, None


def test_comma_decimal_locale_of_the_host_changes_nothing():
    """The host process sets LC_NUMERIC to a comma-decimal locale: fractional arguments are still read, the text
    and JSON still use '.', and the host's locale is left as it was."""
    import subprocess
    import sys
    import os
    name, locpath = _comma_locale()
    if name is None:
        pytest.skip("no comma-decimal locale (de_DE) available or buildable here")
    code = ("import locale, json, xstage.planner as xp\n"
            f"locale.setlocale(locale.LC_NUMERIC, {name!r})\n"
            "assert locale.localeconv()['decimal_point'] == ','\n"
            "r = xp.model(producers=132, bytes_per_producer=32768, gap_us=2.5)\n"
            "text = xp.run('model', '--producers', '132', '--bytes-per-producer', '32768', '--gap-us', '2.5')\n"
            "print(json.dumps(r['inputs'] if 'inputs' in r else r)[:2000])\n"
            "print('R = 375,8' in text, '0,579' in text, locale.localeconv()['decimal_point'])\n")
    env = dict(os.environ)
    if locpath:
        env["LOCPATH"] = locpath
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == "False False ,"


def test_bad_plan_moe_shape(cli):
    expected = cli_error(cli, "plan", "moe", "--shape", "no-such-model").replace("--shape", "shape")
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


# plan_moe's `kernel` keyword: a built-in description by name, a description file, and flags laid over it; each the
# CLI's --json for the same arguments, and a bad description file's error naming the file and the field.
@pytest.mark.parametrize("kwargs, args", [
    (dict(kernel="paper-qwen3.5", platform=PAPER), ["plan", "moe", "--kernel", "paper-qwen3.5", "--platform", PAPER]),
    (dict(kernel=str(REPO / "kernels" / "moe" / "builtin" / "glm-4.5.json"), t_l1_us=4.0, t_l2_us=3.0),
     ["plan", "moe", "--kernel", str(REPO / "kernels" / "moe" / "builtin" / "glm-4.5.json"), "--t-l1-us", "4",
      "--t-l2-us", "3"]),
    (dict(kernel="dit-moe-g2-16e2a", simulate=True, combine="epilogue_issuer", cover_slots=2, staging_us=0.5,
          tokens=1024),
     ["plan", "moe", "--kernel", "dit-moe-g2-16e2a", "--simulate", "--combine", "epilogue_issuer", "--cover-slots",
      "2", "--staging-us", "0.5", "--tokens", "1024"]),
])
def test_plan_moe_kernel_keyword_equals_cli_json(cli, kwargs, args):
    got = xp.plan_moe(**kwargs)
    assert got == cli_json(cli, *args)
    assert got["kernel"]["name"] == (kwargs["kernel"] if "/" not in kwargs["kernel"] else "glm-4.5")


def test_plan_moe_kernel_keyword_errors(cli, tmp_path):
    bad = tmp_path / "k.json"
    bad.write_text(json.dumps({"schema": "xstage.kernel/1", "hidden": 1024, "h_inter": 512, "experts": 8,
                               "top_k": 9}))
    with pytest.raises(ValueError) as info:
        xp.plan_moe(kernel=str(bad))
    assert str(bad) in str(info.value) and "top_k" in str(info.value)
    assert str(info.value) == cli_error(cli, "plan", "moe", "--kernel", str(bad))
    with pytest.raises(ValueError, match="kernel and shape"):
        xp.plan_moe(kernel="deepseek-v3", shape="deepseek-v3")
    with pytest.raises(ValueError, match="^xstage: error: kernel excludes producers"):
        xp.simulate(kernel=str(REPO / "kernels" / "burst_gap" / "gemm-reduce-scatter.json"), producers=4)


# plan_moe through the planner's typed C ABI (xstage_planner_plan_moe): the CLI's --json for the same arguments, and
# the CLI's library never loaded for it; with a trace file it still runs the CLI, which writes the file.
def test_plan_moe_goes_through_the_planner_abi(cli, monkeypatch, tmp_path):
    def no_cli():
        raise AssertionError("plan_moe ran the CLI")

    cases = [
        (dict(shape="qwen3-235b-a22b", simulate=True, routing="skewed", zipf_s=1.5, tokens=1024, ranks=2),
         ["--shape", "qwen3-235b-a22b", "--simulate", "--routing", "skewed", "--zipf-s", "1.5", "--tokens", "1024",
          "--ranks", "2"]),
        (dict(tile_bytes=32768, t_l1_us=2, t_l2_us=1.5, n1=16, n2=8, h_inter=2048, combine="epilogue"),
         ["--tile-bytes", "32768", "--t-l1-us", "2", "--t-l2-us", "1.5", "--n1", "16", "--n2", "8", "--h-inter",
          "2048", "--combine", "epilogue"]),
    ]
    expected = [cli_json(cli, "plan", "moe", *args) for _, args in cases]
    with monkeypatch.context() as m:
        m.setattr(xp._native, "cli_lib", no_cli)
        assert [xp.plan_moe(**kwargs) for kwargs, _ in cases] == expected
    trace = tmp_path / "orders.json"
    traced = xp.plan_moe(shape="deepseek-v3", simulate=True, tokens=256, trace=trace)
    assert traced == xp.plan_moe(shape="deepseek-v3", simulate=True, tokens=256)
    assert json.loads(trace.read_text())["traceEvents"]


@pytest.mark.parametrize("kwargs, args", [
    (dict(hidden=2000000, h_inter=1000, experts=12, top_k=3),
     ["plan", "moe", "--hidden", "2000000", "--h-inter", "1000", "--experts", "12", "--top-k", "3"]),
    (dict(shape="deepseek-v3", tile_bytes=100), ["plan", "moe", "--shape", "deepseek-v3", "--tile-bytes", "100"]),
    (dict(shape="deepseek-v3", lead_rows=64), ["plan", "moe", "--shape", "deepseek-v3", "--lead-rows", "64"]),
])
def test_plan_moe_bad_arguments_raise_the_cli_message_in_python_names(cli, kwargs, args):
    # every flag in the message written as its keyword name, given or not (--simulate is simulate)
    expected = xp._python_names(cli_error(cli, *args), list(inspect.signature(xp.plan_moe).parameters))
    with pytest.raises(ValueError) as info:
        xp.plan_moe(**kwargs)
    assert str(info.value) == expected
    assert "--" not in str(info.value)


# simulate through the planner's typed C ABI: a bad request's message is the CLI's in Python names, as run_json had it.
@pytest.mark.parametrize("kwargs, args", [
    (dict(producers=3, bytes_per_producer=4, latency_us=1),
     ["simulate", "--producers", "3", "--bytes-per-producer", "4", "--latency-us", "1"]),
    (dict(gap_us=3), ["simulate", "--gap-us", "3"]),
    (dict(producers=3, bytes_per_producer=4, bursts=1),
     ["simulate", "--producers", "3", "--bytes-per-producer", "4", "--bursts", "1"]),
    (dict(kernel=str(REPO / "kernels" / "moe" / "builtin" / "glm-4.5.json")),
     ["simulate", "--kernel", str(REPO / "kernels" / "moe" / "builtin" / "glm-4.5.json")]),
])
def test_simulate_bad_arguments_raise_the_cli_message_in_python_names(cli, kwargs, args):
    expected = xp._python_names(cli_error(cli, *args), ["producers", "bytes_per_producer", "gap_us", "bursts",
                                                        "latency_us", "completion_coupled", "kernel", "schedule"])
    with pytest.raises(ValueError) as info:
        xp.simulate(**kwargs)
    assert str(info.value) == expected


HOSTILE_TEXT = ["\x1b[31m1", "a\x9b31mb", "r\u202el", "a\nb", "1" * 1_000_000]
TERMINAL_ACTIVE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")


@pytest.mark.parametrize("text", HOSTILE_TEXT, ids=["esc", "c1-csi", "rtl", "newline", "1MB"])
def test_errors_echo_values_bounded_and_escaped(text):
    """Every error of the planner shows a value as the library's bounded_text does: one line, nothing a terminal
    acts on, at most a few hundred characters whatever the value's size."""
    calls = [lambda: xp.model(producers=text, bytes_per_producer=32768),
             lambda: xp.model(producers=132, bytes_per_producer=32768, platform=text),
             lambda: xp.plan_moe(shape="deepseek-v3", precision=text),
             lambda: xp.model(producers=132, bytes_per_producer=[text] * 1000)]
    for call in calls:
        with pytest.raises((ValueError, TypeError)) as e:
            call()
        message = str(e.value)
        assert not TERMINAL_ACTIVE.search(message), repr(message[:200])
        assert len(message) < 600, len(message)


def test_bounded_is_the_one_echo_helper():
    assert xp._bounded("a\x1b[31mb\u202ec\x9bd\ne") == "a\\x1b[31mb\\u202ec\\u009bd\\ne"
    assert xp._bounded("1" * 1_000_000) == "1" * 80 + "... (1000000 bytes)"
    assert xp._bounded("\x1b" * 80).endswith("... (80 bytes)")  # cut between escapes, never inside one
    assert xp._shown([1] * 100_000).endswith("... (300000 bytes)")


# fit and fidelity through the planner's typed C ABI (xstage_planner_fit, xstage_planner_fidelity): the CLI's --json
# for the same arguments, the CLI's library never loaded; with an `out` file they run the CLI, which writes it.
CALIBRATION = REPO / "results" / "h200-x2" / "calibration"
RECORDS = str(CALIBRATION / "records.csv")
RAW = str(CALIBRATION / "raw.json")
MEASURED = str(REPO / "platforms" / "h200_x2_measured.json")


def no_cli():
    raise AssertionError("the CLI ran")


def small_records(tmp_path):
    """The committed records at K = 16 and 33: a cross-validation of seconds."""
    lines = (CALIBRATION / "records.csv").read_text().splitlines(keepends=True)
    path = tmp_path / "records_k16_k33.csv"
    path.write_text(lines[0] + "".join(x for x in lines[1:] if x.split(",")[2] in ("16", "33")))
    return str(path)


def test_fit_goes_through_the_planner_abi(cli, monkeypatch, tmp_path):
    cases = [
        (dict(records=RECORDS), ["--records", RECORDS]),
        (dict(records=CALIBRATION / "records.csv", raw=RAW, name="mine", link_gbps=450, link_source="NVLink 4",
              copy_engine_gbps=392.5, sms=132),
         ["--records", RECORDS, "--raw", RAW, "--name", "mine", "--link-gbps", "450", "--link-source", "NVLink 4",
          "--copy-engine-gbps", "392.5", "--sms", "132"]),
    ]
    expected = []
    for n, (_, args) in enumerate(cases):
        out = tmp_path / f"cli{n}.json"
        j = cli_json(cli, "fit", *args, "--out", str(out))
        assert j["out"] == str(out)
        expected.append(dict(j, out=None, platform=json.loads(out.read_text())))
    with monkeypatch.context() as m:
        m.setattr(xp._native, "cli_lib", no_cli)
        assert [xp.fit(**kwargs) for kwargs, _ in cases] == expected
    # with out: the CLI writes the platform the ABI returns
    out = tmp_path / "written.json"
    written = xp.fit(records=RECORDS, raw=RAW, out=out)
    assert written["out"] == str(out) and "platform" not in written
    assert json.loads(out.read_text()) == xp.fit(records=RECORDS, raw=RAW)["platform"]
    with pytest.raises(ValueError, match="already exists"):
        xp.fit(records=RECORDS, out=out)
    assert xp.fit(records=RECORDS, out=out, force=True)["out"] == str(out)


def test_fidelity_goes_through_the_planner_abi(cli, monkeypatch, tmp_path):
    small = small_records(tmp_path)
    traces = [str(REPO / "results" / "h200-x2" / "moe" / f"moe_trace_run_{s}.json")
              for s in ("dit-moe-g2-16e2a", "qwen3-235b-a22b")]
    ulysses = str(REPO / "results" / "h200-x2" / "ulysses" / "ulysses.json")
    cases = [
        (dict(records=RECORDS, raw=RAW), ["--records", RECORDS, "--raw", RAW]),
        (dict(records=RECORDS, platform=PAPER, traces=traces[0], ulysses=ulysses),
         ["--records", RECORDS, "--platform", PAPER, "--traces", traces[0], "--ulysses", ulysses]),
        (dict(records=RECORDS, platform=MEASURED, traces=traces), ["--records", RECORDS, "--platform", MEASURED,
                                                                   "--traces", *traces]),
        (dict(records=small, cross_validate=True, folds=3), ["--records", small, "--cross-validate", "--folds", "3"]),
    ]
    expected = []
    for _, args in cases:
        j = cli_json(cli, "fidelity", *args)
        assert j["provenance"]["command"][0] == "xstage"
        for cli_only in ("command", "git_revision", "git_describe"):
            del j["provenance"][cli_only]
        expected.append(j)
    with monkeypatch.context() as m:
        m.setattr(xp._native, "cli_lib", no_cli)
        assert [xp.fidelity(**kwargs) for kwargs, _ in cases] == expected
    # with out: the CLI writes the report it prints
    out = tmp_path / "fidelity.json"
    written = xp.fidelity(records=RECORDS, raw=RAW, out=out)
    assert json.loads(out.read_text()) == written
    assert {k: v for k, v in written.items() if k != "provenance"} == \
        {k: v for k, v in expected[0].items() if k != "provenance"}


@pytest.mark.parametrize("function, kwargs, args", [
    (xp.fit, dict(records=RECORDS, link_gbps=0, link_source="x"),
     ["fit", "--records", RECORDS, "--link-gbps", "0", "--link-source", "x", "--out", "/tmp/never-written.json"]),
    (xp.fit, dict(records=RECORDS, link_gbps=450), ["fit", "--records", RECORDS, "--link-gbps", "450", "--out",
                                                    "/tmp/never-written.json"]),
    (xp.fit, dict(records=RECORDS, sms=132), ["fit", "--records", RECORDS, "--sms", "132", "--out",
                                              "/tmp/never-written.json"]),
    (xp.fit, dict(records=RECORDS, name=" "), ["fit", "--records", RECORDS, "--name", " ", "--out",
                                               "/tmp/never-written.json"]),
    (xp.fit, dict(records="/nonexistent/records.csv"), ["fit", "--records", "/nonexistent/records.csv", "--out",
                                                        "/tmp/never-written.json"]),
    (xp.fidelity, dict(records=RECORDS, folds=3), ["fidelity", "--records", RECORDS, "--folds", "3"]),
    (xp.fidelity, dict(records=RECORDS, cross_validate=True, folds=11),
     ["fidelity", "--records", RECORDS, "--cross-validate", "--folds", "11"]),
    (xp.fidelity, dict(records=RECORDS, traces=["/nonexistent/t.json"]),
     ["fidelity", "--records", RECORDS, "--traces", "/nonexistent/t.json"]),
    (xp.fidelity, dict(records=RECORDS, ulysses=MEASURED), ["fidelity", "--records", RECORDS, "--ulysses", MEASURED]),
])
def test_fit_and_fidelity_bad_arguments_raise_the_cli_message_in_python_names(cli, monkeypatch, function, kwargs,
                                                                               args):
    expected = xp._python_names(cli_error(cli, *args), list(inspect.signature(function).parameters))
    with monkeypatch.context() as m:
        m.setattr(xp._native, "cli_lib", no_cli)
        with pytest.raises(ValueError) as info:
            function(**kwargs)
    assert str(info.value) == expected
    assert "--" not in str(info.value)


def test_fit_and_fidelity_keywords_are_typed():
    with pytest.raises(TypeError, match="link_gbs"):
        xp.fit(records=RECORDS, link_gbs=450)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="cross_validation"):
        xp.fidelity(records=RECORDS, cross_validation=True)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="^xstage: error: records is required$"):
        xp.fit(records=None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="^xstage: error: sms: must be a decimal integer"):
        xp.fit(records=RECORDS, link_gbps=450, link_source="x", sms=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="^link_gbps: inf; accepted: a finite number"):
        xp.fit(records=RECORDS, link_gbps=float("inf"), link_source="x")
    with pytest.raises(ValueError, match="^xstage: error: force requires out"):
        xp.fidelity(records=RECORDS, force=True)


def test_planner_c_api_version():
    assert xp._native.lib().xstage_planner_c_api_version() == xp._native.PLANNER_C_API_VERSION == 5
