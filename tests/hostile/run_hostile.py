#!/usr/bin/env python3
"""Hostile and careless inputs against the xstage CLI (and, where cheap, the Python planner and the planner's C ABI):
issue #47.

Plain Python 3 standard library (no pytest). Every case is generated in its own temporary folder from copies of
the committed inputs (platforms/, kernels/, results/h200-x2/..., tests/fuzz/corpus/), run under a timeout and
classified:

  crash        killed by a signal, or an exit code not in {0, 1, 2} (docs/cli.md: 0 success, 2 bad input, 1 failure)
  hang         still running at the timeout
  wrong_write  a file created/changed/removed where the command failed; an input, a device node, a FIFO or a
               symlink replaced or changed; a temp file left behind (after success or after SIGINT/SIGTERM); a
               partial output after a signal; a created file whose mode ignores the umask; exit 0 with stdout on
               /dev/full or closed; two concurrent writers without --force both succeeding
  accepted     exit 0 where docs/cli.md says the input must be refused (a bad value or a combination that has no
               effect), or a success that prints a non-finite number (inf, nan)
  unclear      on a refusal (exit 1 or 2): stderr (warning lines aside) not exactly one line, longer than 600 bytes,
               holding raw control bytes / ESC / bidi overrides / invalid UTF-8, or not naming the argument, field or
               file that was fed; on any exit: raw ESC / control / bidi bytes in stdout or stderr
  ok           none of the above

The first matching category in that order wins. Usage:

  python3 tests/hostile/run_hostile.py --cli build-kd/xstage OUTDIR [--jobs N] [--timeout 20] [--only GROUP,...]

writes OUTDIR/summary.json and OUTDIR/summary.txt (counts per category, per command and per group; every non-ok
case with its command line and outcome, bounded) and OUTDIR/cases.jsonl (every case, bounded).
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import datetime
import gzip
import hashlib
import json
import os
import random
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(REPO, "tests", "fuzz", "corpus")
CAL = os.path.join(REPO, "results", "h200-x2", "calibration")
MOE = os.path.join(REPO, "results", "h200-x2", "moe")
ULY = os.path.join(REPO, "results", "h200-x2", "ulysses")
PLAT_MEASURED = os.path.join(REPO, "platforms", "h200_x2_measured.json")
PLAT_PAPER = os.path.join(REPO, "platforms", "paper_8gpu_148sm.json")
KERNEL_BG = os.path.join(REPO, "kernels", "burst_gap")
KERNEL_MOE = os.path.join(REPO, "kernels", "moe", "builtin", "deepseek-v3.json")
SEP = "\x1f"  # never in a generated argument

ESC_SEQ = "\x1b[31mRED\x1b[0m"
RTL = "\u202e"
BIDI = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
CTRL = re.compile("[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")  # \t and \n allowed in outputs; messages check \n apart
NONFINITE_OUT = re.compile(r"(?<![A-Za-z_])(-?inf|-?nan|infinity)(?![A-Za-z_])", re.IGNORECASE)


def corpus_text(name: str) -> bytes:
    """A fuzz seed without its first byte (the fuzz harness's loader selector)."""
    with open(os.path.join(CORPUS, name), "rb") as f:
        return f.read()[1:]


def read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


# ----------------------------------------------------------------------------------------------------------------
# Cases


class Case:
    """One hostile input. `setup(tmp)` prepares files in the case's folder and returns a dict:
    argv (list of str, without the CLI), and optionally out (paths the command may create/replace on success),
    names (list of groups; each group a list of alternatives, one of which the refusal must contain),
    umask, stdout ('pipe' | 'devfull' | 'closed'), stdin bytes, env (dict), timeout."""

    __slots__ = ("cid", "group", "command", "expect", "setup", "kind", "note", "timeout")

    def __init__(self, group, command, expect, setup, kind="plain", note="", timeout=None):
        self.cid = ""
        self.group = group
        self.command = command
        self.expect = expect  # 'refuse' | 'accept' | 'any'
        self.setup = setup
        self.kind = kind      # plain | signal | race | python | capi
        self.note = note
        self.timeout = timeout


CASES: list[Case] = []


def add(group, command, expect, setup, **kw):
    CASES.append(Case(group, command, expect, setup, **kw))


def write(tmp, name, data):
    path = os.path.join(tmp, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass"))
    return path


def copy(tmp, src, name=None):
    dst = os.path.join(tmp, name or os.path.basename(src))
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copyfile(src, dst)
    return dst


def opt_names(option):
    bare = option.lstrip("-")
    return [[option, bare, bare.replace("-", "_")]]


# --- base commands: (command label, argv prefix builder, the options whose values are fuzzed) -------------------

INT, FLT = "int", "float"


def base_model(tmp):
    return ["model", "--producers", "132", "--bytes-per-producer", "32768", "--gap-us", "2"]


def base_simulate(tmp):
    return ["simulate", "--producers", "16", "--bytes-per-producer", "32768", "--gap-us", "2", "--bursts", "6"]


def base_plan(tmp):
    return ["plan"]


def base_plan_attn(tmp):
    return ["plan", "attn", "--seq", "8192"]


def base_plan_moe(tmp):
    return ["plan", "moe", "--shape", "deepseek-v3"]


def base_plan_moe_tile(tmp):
    return ["plan", "moe", "--tile-bytes", "32768", "--t-l1-us", "3", "--t-l2-us", "2", "--n1", "8", "--n2", "8",
            "--h-inter", "2048"]


def base_plan_moe_sim(tmp):
    return ["plan", "moe", "--shape", "deepseek-v3", "--simulate", "--tokens", "512"]


def base_fit(tmp):
    rec = write(tmp, "records.csv", corpus_text("records"))
    return ["fit", "--records", rec, "--out", os.path.join(tmp, "fitted.json")]


def base_fidelity(tmp):
    rec = write(tmp, "records.csv", corpus_text("records"))
    return ["fidelity", "--records", rec]


def base_paper(tmp):
    return ["paper", "--platform", copy(tmp, PLAT_PAPER), "--only", "ecc,table3"]


ARG_OPTIONS = [
    # (command label, base, option, type, extra args after the option)
    ("model", base_model, "--producers", INT, []),
    ("model", base_model, "--bytes-per-producer", FLT, []),
    ("model", base_model, "--gap-us", FLT, []),
    ("model", base_model, "--t-iss0-us", FLT, []),
    ("model", base_model, "--capacity-bytes", FLT, []),
    ("simulate", base_simulate, "--producers", INT, []),
    ("simulate", base_simulate, "--bytes-per-producer", FLT, []),
    ("simulate", base_simulate, "--gap-us", FLT, []),
    ("simulate", base_simulate, "--bursts", INT, []),
    ("simulate", base_simulate, "--t-iss0-us", FLT, []),
    ("simulate", base_simulate, "--capacity-bytes", FLT, []),
    ("simulate", base_simulate, "--latency-us", FLT, ["--completion-coupled"]),
    ("plan", base_plan, "--producers", INT, []),
    ("plan attn", base_plan_attn, "--producers", INT, []),
    ("plan attn", base_plan_attn, "--block-m", INT, []),
    ("plan attn", base_plan_attn, "--head-dim", INT, []),
    ("plan attn", base_plan_attn, "--block-n", INT, []),
    ("plan attn", base_plan_attn, "--out-bytes", INT, []),
    ("plan attn", base_plan_attn, "--sigma-us", FLT, []),
    ("plan attn", base_plan_attn, "--qk-cover-us", FLT, []),
    ("plan attn", base_plan_attn, "--latency-us", FLT, []),
    ("plan attn", base_plan_attn, "--cover-us", FLT, []),
    ("plan attn", base_plan_attn, "--seq", INT, []),
    ("plan attn", base_plan_attn, "--heads-per-gpu", INT, []),
    ("plan attn", base_plan_attn, "--batch", INT, []),
    ("plan moe", base_plan_moe, "--hidden", INT, []),
    ("plan moe", base_plan_moe, "--h-inter", INT, []),
    ("plan moe", base_plan_moe, "--experts", INT, []),
    ("plan moe", base_plan_moe, "--top-k", INT, []),
    ("plan moe", base_plan_moe, "--sm-tflops", FLT, []),
    ("plan moe", base_plan_moe, "--t-l1-us", FLT, []),
    ("plan moe", base_plan_moe, "--block-m", INT, []),
    ("plan moe", base_plan_moe, "--block-n", INT, []),
    ("plan moe", base_plan_moe, "--out-bytes", INT, []),
    ("plan moe", base_plan_moe, "--staging-us", FLT, []),
    ("plan moe", base_plan_moe_tile, "--tile-bytes", FLT, []),
    ("plan moe", base_plan_moe_tile, "--n1", FLT, []),
    ("plan moe", base_plan_moe_sim, "--ranks", INT, []),
    ("plan moe", base_plan_moe_sim, "--zipf-s", FLT, ["--routing", "skewed"]),
    ("plan moe", base_plan_moe_sim, "--lead-rows", INT, []),
    ("plan moe", base_plan_moe_sim, "--experts-per-wave", INT, []),
    ("plan moe", base_plan_moe_sim, "--cover-slots", INT, ["--combine", "epilogue_issuer"]),
    ("fit", base_fit, "--link-gbps", FLT, ["--link-source", "test"]),
    ("fit", base_fit, "--sms", INT, ["--link-gbps", "400", "--link-source", "test"]),
    ("fidelity", base_fidelity, "--folds", INT, ["--cross-validate"]),
    ("paper", base_paper, "--a2a-rate-gbps", FLT, []),
    ("paper", base_paper, "--a2a-fixed-us", FLT, []),
    ("paper", base_paper, "--latency-us", FLT, []),
    ("paper", base_paper, "--heads-per-gpu", INT, []),
]

# value label, text, expectation: 'bad' refused by every numeric option, 'int-bad' refused by integer options,
# 'any' not judged (only crash/hang/write/message/non-finite output checks)
ARG_VALUES = [
    ("empty", "", "bad"), ("nan", "nan", "bad"), ("NaN", "NaN", "bad"), ("inf", "inf", "bad"),
    ("-inf", "-inf", "bad"), ("Infinity", "Infinity", "bad"), ("1e400", "1e400", "bad"), ("-1e400", "-1e400", "bad"),
    ("text", "abc", "bad"), ("1e", "1e", "bad"), ("comma-decimal", "1,5", "bad"), ("arabic-digits", "\u0661\u0662", "bad"),
    ("esc", "\x1b[31m5\x1b[0m", "bad"), ("newline", "5\n6", "bad"), ("rtl", RTL + "5", "bad"),
    ("long-junk-100k", "x" * 100000, "bad"), ("5000-digits", "5" * 5000, "bad"), ("-1", "-1", "bad"),
    ("-2^31", "-2147483648", "bad"),
    ("zero", "0", "any"), ("-0", "-0", "any"), ("octal-010", "010", "any"), ("hex", "0x10", "any"),
    ("space-padded", " 7 ", "any"), ("plus", "+7", "any"), ("1e308", "1e308", "any"), ("subnormal", "4e-320", "any"),
    ("1e-400", "1e-400", "any"), ("2^31-1", "2147483647", "any"), ("2^31", "2147483648", "int-bad"),
    ("2^32+132", "4294967428", "int-bad"), ("2^63", "9223372036854775808", "int-bad"), ("1.5", "1.5", "int-bad"),
]


def gen_args():
    for command, base, option, typ, extra in ARG_OPTIONS:
        for label, value, cls in ARG_VALUES:
            expect = "refuse" if cls == "bad" or (cls == "int-bad" and typ == INT) else "any"

            def setup(tmp, base=base, option=option, value=value, extra=extra):
                argv = base(tmp)
                if option in argv:  # replace the base's value
                    i = argv.index(option)
                    argv = argv[:i] + argv[i + 2:]
                argv = argv + extra + [option, value]
                out = [a for a in argv if a.endswith("fitted.json")]
                return {"argv": argv, "names": opt_names(option), "out": out}

            # cross-validation refits the platform per fold: seconds per fold, so a longer limit before "hang"
            add("arg-values", command, expect, setup, note=f"{option} {label}",
                timeout=120 if "--cross-validate" in extra else None)


# --- flag combinations that docs/cli.md says are refused, and parsing oddities --------------------------------------


def gen_combos():
    P = ["plan", "moe"]
    T_LEVEL = ["--tile-bytes", "32768", "--t-l1-us", "3", "--t-l2-us", "2", "--n1", "8", "--n2", "8", "--h-inter", "2048"]
    combos = [
        # (command, argv builder, names groups)
        ("plan moe", lambda t: P + ["--shape", "deepseek-v3", "--tile-bytes", "1"], [["--tile-bytes"]]),
        ("plan moe", lambda t: P + ["--shape", "deepseek-v3", "--n1", "4"], [["--n1"]]),
        ("plan moe", lambda t: P + ["--kernel", "deepseek-v3", "--n2", "4"], [["--n2"]]),
        ("plan moe", lambda t: P + ["--hidden", "512", "--h-inter", "256", "--experts", "16", "--top-k", "2",
                                    "--tile-bytes", "1"], [["--tile-bytes"]]),
        ("plan moe", lambda t: P + T_LEVEL + ["--precision", "fp8"], [["--precision"]]),
        ("plan moe", lambda t: P + T_LEVEL + ["--sm-tflops", "5"], [["--sm-tflops"]]),
        ("plan moe", lambda t: P + T_LEVEL + ["--block-m", "64"], [["--block-m"]]),
        ("plan moe", lambda t: P + T_LEVEL + ["--out-bytes", "1"], [["--out-bytes"]]),
        ("plan moe", lambda t: P + T_LEVEL + ["--simulate"], [["--simulate"]]),
        ("plan moe", lambda t: P + ["--shape", "deepseek-v3", "--precision", "fp8", "--sm-tflops", "5"],
         [["--precision"], ["--sm-tflops"]]),
        ("plan moe", lambda t: P + ["--shape", "deepseek-v3", "--t-l1-us", "3", "--t-l2-us", "2", "--precision", "fp8"],
         [["--precision"]]),
        ("plan moe", lambda t: P + ["--shape", "deepseek-v3", "--t-l1-us", "3", "--t-l2-us", "2", "--sm-tflops", "5"],
         [["--sm-tflops"]]),
        ("plan moe", lambda t: P + ["--kernel", "deepseek-v3", "--shape", "deepseek-v3"], [["--kernel"], ["--shape"]]),
        ("plan moe", lambda t: P + ["--shape", "deepseek-v3", "--simulate", "--zipf-s", "1.3"], [["--zipf-s", "--zipf"]]),
        ("plan moe", lambda t: P + ["--shape", "deepseek-v3", "--simulate", "--routing", "balanced", "--zipf-s", "1.3"],
         [["--zipf-s", "--zipf"]]),
        ("plan moe", lambda t: P + ["--shape", "deepseek-v3", "--simulate", "--cover-slots", "2"], [["--cover-slots"]]),
        ("plan moe", lambda t: P + ["--shape", "deepseek-v3", "--simulate", "--combine", "piggyback", "--cover-slots",
                                    "2"], [["--cover-slots"]]),
        ("plan moe", lambda t: P + ["--hidden", "512", "--h-inter", "256", "--experts", "16", "--top-k", "2",
                                    "--simulate", "--tokens", "4", "--routing", write(t, "routing.json",
                                                                                      corpus_text("routing"))],
         [["--tokens"]]),
        ("plan moe", lambda t: P + ["--shape", "deepseek-v3", "--force"], [["--force"]]),
        ("plan moe", lambda t: P + ["--shape", "deepseek-v3", "--simulate", "--force"], [["--force"]]),
        ("plan moe", lambda t: P + ["--shape", "deepseek-v3", "--combine", "sideways", "--simulate"], [["--combine"]]),
        ("plan moe", lambda t: P + ["--shape", "deepseek-v3", "--precision", "fp4"], [["--precision"]]),
        ("plan moe", lambda t: P + ["--shape", "no-such-shape"], [["--shape", "no-such-shape"]]),
        ("plan moe", lambda t: P + ["--kernel", "no-such-kernel"], [["--kernel", "no-such-kernel"]]),
        ("plan moe", lambda t: P + ["--shape", "deepseek-v3", "--simulate", "--routing", "sideways"],
         [["--routing", "sideways"]]),
        ("plan moe", lambda t: P, [["--kernel", "--shape", "--tile-bytes", "description", "kernel"]]),
        ("plan moe", lambda t: P + ["--tile-bytes", "32768"], [["--t-l1-us", "--n1", "--h-inter", "--t-l2-us", "--n2"]]),
        ("simulate", lambda t: ["simulate", "--producers", "16", "--bytes-per-producer", "32768", "--latency-us", "3"],
         [["--latency-us"], ["--completion-coupled"]]),
        ("simulate", lambda t: ["simulate", "--producers", "16", "--bytes-per-producer", "32768", "--force"],
         [["--force"]]),
        ("simulate", lambda t: ["simulate", "--producers", "16"], [["--bytes-per-producer"]]),
        ("simulate", lambda t: ["simulate"], [["--producers", "--schedule", "--kernel"]]),
        ("simulate", lambda t: ["simulate", "--schedule", write(t, "schedule.json", corpus_text("schedule")),
                                "--producers", "4"], [["--schedule"], ["--producers"]]),
        ("fit", lambda t: base_fit(t) + ["--link-source", "x"], [["--link-source"]]),
        ("fit", lambda t: base_fit(t) + ["--copy-engine-gbps", "300"], [["--copy-engine-gbps"]]),
        ("fit", lambda t: base_fit(t) + ["--sms", "132"], [["--sms"]]),
        ("fit", lambda t: base_fit(t) + ["--link-gbps", "400"], [["--link-source"]]),
        ("fit", lambda t: ["fit", "--records", write(t, "records.csv", corpus_text("records"))], [["--out"]]),
        ("fit", lambda t: ["fit", "--out", os.path.join(t, "o.json")], [["--records"]]),
        ("fidelity", lambda t: base_fidelity(t) + ["--force"], [["--force"]]),
        ("fidelity", lambda t: base_fidelity(t) + ["--folds", "1", "--cross-validate"], [["--folds"]]),
        ("fidelity", lambda t: base_fidelity(t) + ["--folds", "11", "--cross-validate"], [["--folds"]]),
        ("fidelity", lambda t: base_fidelity(t) + ["--folds", "5"], [["--folds"]]),
        ("paper", lambda t: ["paper", "--platform", copy(t, PLAT_MEASURED), "--own", own_dir(t), "--only", "knee"],
         [["--only"], ["--own"]]),
        ("paper", lambda t: ["paper", "--platform", copy(t, PLAT_MEASURED), "--own", own_dir(t), "--tokens", "100"],
         [["--tokens"], ["--own"]]),
        ("paper", lambda t: ["paper", "--platform", copy(t, PLAT_MEASURED), "--own", own_dir(t), "--a2a-rate-gbps",
                             "100"], [["--a2a-rate-gbps"], ["--own"]]),
        ("paper", lambda t: ["paper", "--platform", copy(t, PLAT_MEASURED), "--own", own_dir(t), "--latency-us", "1"],
         [["--latency-us"], ["--own"]]),
        ("paper", lambda t: ["paper", "--platform", copy(t, PLAT_MEASURED), "--own", own_dir(t), "--heads-per-gpu",
                             "2"], [["--heads-per-gpu"], ["--own"]]),
        ("paper", lambda t: ["paper", "--platform", copy(t, PLAT_PAPER), "--only", "knee,bogus"], [["bogus", "--only"]]),
        ("paper", lambda t: ["paper", "--platform", copy(t, PLAT_PAPER), "--only", ""], [["--only"]]),
        ("paper", lambda t: ["paper"], [["--platform"]]),
        ("model", lambda t: ["model", "--producers4", "--bytes-per-producer", "32768"], [["--producers4"]]),
        ("model", lambda t: ["model", "--producers", "4", "--bytes-per-producer", "32768", "stray"], [["stray"]]),
        ("model", lambda t: ["model", "--producers", "4", "--producers", "8", "--bytes-per-producer", "32768"],
         [["--producers"]]),
        ("model", lambda t: ["model", "--producers", "4", "--bytes-per-producer", "32768", "--no-such-flag"],
         [["--no-such-flag"]]),
        ("model", lambda t: ["model", "--bytes-per-producer", "32768"], [["--producers"]]),
        ("model", lambda t: ["model", "--producers", "4"], [["--bytes-per-producer"]]),
        ("model", lambda t: ["model", "--producers", "--bytes-per-producer", "32768"], [["--producers"]]),
        ("xstage", lambda t: ["no-such-command"], [["no-such-command"]]),
        ("xstage", lambda t: [], [["subcommand", "SUBCOMMAND", "command", "Usage"]]),
        ("xstage", lambda t: ["--" + "x" * 120000], [["--x"]]),
        ("xstage", lambda t: ["x" * 120000], [["xxx"]]),
        ("trace convert", lambda t: ["trace", "convert", "--from", "nsys", copy(t, CORPUS + "/traces", "d.json"),
                                     "--out", os.path.join(t, "o.json")], [["--from", "nsys"]]),
        ("trace", lambda t: ["trace"], [["convert", "subcommand", "SUBCOMMAND"]]),
    ]
    for command, builder, names in combos:
        def setup(tmp, builder=builder, names=names):
            return {"argv": builder(tmp), "names": names}
        add("combos", command, "refuse", setup)
    # documented as no-effect-but-undocumented-as-refused: judged only for crash/hang/write/message
    loose = [
        ("paper", lambda t: ["paper", "--platform", copy(t, PLAT_PAPER), "--only", "ecc", "--tokens", "100"]),
        ("paper", lambda t: ["paper", "--platform", copy(t, PLAT_PAPER), "--only", "ecc", "--a2a-rate-gbps", "100"]),
        ("plan", lambda t: ["plan", "--producers", "8", "attn"]),
        ("model", lambda t: ["model", "--help", "--producers", "x"]),
        ("simulate", lambda t: ["simulate", "--help", "--bursts", "-5"]),
        ("model", lambda t: ["--help", "model"]),
        ("xstage", lambda t: ["--version", "--help"]),
        ("xstage", lambda t: ["--version", "extra"]),
        ("paper", lambda t: ["paper", "--platform", copy(t, PLAT_PAPER), "--only", "knee", "--force"]),
        ("model", lambda t: ["model", "--producers=4", "--bytes-per-producer=32768", "--json=yes"]),
    ]
    for command, builder in loose:
        add("combos-loose", command, "any", lambda tmp, builder=builder: {"argv": builder(tmp)})
    for helper in (["--help"], ["model", "--help"], ["plan", "moe", "--help"], ["simulate", "--help"], ["fit", "--help"],
                   ["fidelity", "--help"], ["paper", "--help"], ["trace", "convert", "--help"], ["--version"]):
        add("help", " ".join(helper[:-1]) or "xstage", "accept", lambda tmp, h=helper: {"argv": list(h)})


def own_dir(tmp):
    d = os.path.join(tmp, "own")
    if not os.path.isdir(d):
        for sub, name in (("moe", "moe_matrix.json"), ("moe", "moe_matrix_fp8.json"), ("ulysses", "ulysses.json")):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
            shutil.copyfile(os.path.join(REPO, "results", "h200-x2", sub, name), os.path.join(d, sub, name))
    return d


# --- file loaders: generic file-level mutations and per-field mutations ------------------------------------------

def _trace_dump() -> bytes:
    with gzip.open(os.path.join(MOE, "moe_timeline_dit-moe-g2-16e2a.json.gz"), "rb") as f:
        return f.read()


# carrier: (loader label, command label, file basename, valid content (bytes, lazily), argv builder(tmp, path)->argv,
# out paths builder, json?)
def _carriers():
    rec_small = corpus_text("records")
    C = []

    def c(loader, command, name, content, argv, out=lambda t: [], is_json=True, timeout=None):
        C.append(dict(loader=loader, command=command, name=name, content=content, argv=argv, out=out,
                      is_json=is_json, timeout=timeout))

    c("platform", "model", "platform.json", lambda: read(PLAT_MEASURED),
      lambda t, p: ["model", "--platform", p, "--producers", "132", "--bytes-per-producer", "32768", "--gap-us", "2"])
    c("platform", "plan", "platform.json", lambda: read(PLAT_PAPER), lambda t, p: ["plan", "--platform", p])
    c("platform", "simulate", "platform.json", lambda: read(PLAT_MEASURED),
      lambda t, p: ["simulate", "--platform", p, "--producers", "16", "--bytes-per-producer", "32768", "--bursts", "4"])
    c("platform", "paper", "platform.json", lambda: read(PLAT_PAPER),
      lambda t, p: ["paper", "--platform", p, "--only", "knee,ecc"])
    c("records", "fit", "records.csv", lambda: rec_small,
      lambda t, p: ["fit", "--records", p, "--out", os.path.join(t, "fitted.json")],
      out=lambda t: [os.path.join(t, "fitted.json")], is_json=False)
    c("records", "fidelity", "records.csv", lambda: rec_small, lambda t, p: ["fidelity", "--records", p],
      is_json=False)
    c("raw", "fidelity", "raw.json", lambda: corpus_text("raw"),
      lambda t, p: ["fidelity", "--records", write(t, "records.csv", rec_small), "--raw", p])
    c("raw", "fit", "raw.json", lambda: corpus_text("raw"),
      lambda t, p: ["fit", "--records", write(t, "records.csv", rec_small), "--raw", p, "--out",
                    os.path.join(t, "fitted.json")], out=lambda t: [os.path.join(t, "fitted.json")])
    c("traces", "fidelity", "traces.json", lambda: corpus_text("traces"),
      lambda t, p: ["fidelity", "--records", write(t, "records.csv", rec_small), "--traces", p])
    c("ulysses", "fidelity", "ulysses.json", lambda: corpus_text("ulysses"),
      lambda t, p: ["fidelity", "--records", write(t, "records.csv", rec_small), "--ulysses", p])
    c("routing", "plan moe", "routing.json", lambda: corpus_text("routing"),
      lambda t, p: ["plan", "moe", "--hidden", "512", "--h-inter", "256", "--experts", "16", "--top-k", "2",
                    "--simulate", "--routing", p])
    c("kernel-moe", "plan moe", "kernel.json", lambda: read(KERNEL_MOE), lambda t, p: ["plan", "moe", "--kernel", p])
    c("kernel-burst-gap", "simulate", "kernel.json", lambda: corpus_text("burst_gap_kernel"),
      lambda t, p: ["simulate", "--kernel", p])
    c("schedule", "simulate", "schedule.json", lambda: corpus_text("schedule"),
      lambda t, p: ["simulate", "--schedule", p])
    c("moe-bench-dump", "trace convert", "dump.json", _trace_dump,
      lambda t, p: ["trace", "convert", "--from", "moe-bench", p, "--out", os.path.join(t, "trace.json")],
      out=lambda t: [os.path.join(t, "trace.json")])
    return C


def _deep(n, open_="[", close="]"):
    return open_ * n + close * n


def _file_mutations(carrier):
    """(label, expect, writer(tmp, path) -> path actually passed, name groups)"""
    name = carrier["name"]
    is_json = carrier["is_json"]
    M = []

    def m(label, expect, fn, names=None):
        M.append((label, expect, fn, names))

    def data(content):
        def fn(t, p, content=content):
            body = content() if callable(content) else content
            with open(p, "wb") as f:
                f.write(body)
            return p
        return fn

    valid = carrier["content"]
    m("empty", "refuse", data(b""))
    m("whitespace", "refuse", data(b" \n\t\n"))
    for seed in range(3):
        m(f"binary-junk-{seed}", "refuse", data(lambda seed=seed: random.Random(seed).randbytes(4096)))
    m("nul-bytes", "refuse", data(b"\0" * 1024))
    m("truncated-half", "refuse", data(lambda: valid()[: len(valid()) // 2]))
    m("truncated-1", "refuse", data(lambda: valid()[:-2]))
    m("bom", "any", data(lambda: b"\xef\xbb\xbf" + valid()))
    m("crlf", "any", data(lambda: valid().replace(b"\n", b"\r\n")))
    m("trailing-garbage", "refuse", data(lambda: valid() + b"\n}}garbage\x01"))
    m("nul-inside", "refuse", data(lambda: valid()[:40] + b"\0" + valid()[40:]))
    m("deep-1e6", "refuse", data(lambda: _deep(1000000).encode()))
    m("deep-obj-1e5", "refuse", data(lambda: ('{"a":' * 100000 + "1" + "}" * 100000).encode()))
    m("utf16", "refuse", data(lambda: valid().decode("utf-8").encode("utf-16")))
    m("latin1-junk-name", "any", data(lambda: valid().replace(b"e", b"\xe9", 3)))

    def sparse(t, p):
        with open(p, "wb") as f:
            f.truncate(300 * 1024 * 1024)
        return p
    m("huge-sparse-300MB", "refuse", sparse)

    def big_prefix(t, p):  # valid content padded with 70 MB of whitespace
        with open(p, "wb") as f:
            f.write(b" " * (70 * 1024 * 1024) if is_json else b"")
            f.write(valid())
            if not is_json:
                f.write(b"\n" * (70 * 1024 * 1024))
        return p
    m("huge-70MB-padding", "any", big_prefix)

    def special(kind):
        def fn(t, p):
            if kind == "fifo":
                os.mkfifo(p)
            elif kind == "dir":
                os.mkdir(p)
            elif kind == "dangling":
                os.symlink(os.path.join(t, "nowhere", "x.json"), p)
            elif kind == "devnull":
                os.symlink("/dev/null", p)
            elif kind == "devzero":
                os.symlink("/dev/zero", p)
            elif kind == "devurandom":
                os.symlink("/dev/urandom", p)
            elif kind == "symlink-ok":
                real = os.path.join(t, "real_" + name)
                with open(real, "wb") as f:
                    f.write(valid())
                os.symlink(real, p)
            elif kind == "missing":
                pass
            elif kind == "mknod-null":
                os.mknod(p, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
            return p
        return fn
    m("fifo", "refuse", special("fifo"))
    m("directory", "refuse", special("dir"))
    m("dangling-symlink", "refuse", special("dangling"))
    m("symlink-to-dev-null", "refuse", special("devnull"))
    m("symlink-to-dev-zero", "refuse", special("devzero"))
    m("symlink-to-dev-urandom", "refuse", special("devurandom"))
    m("mknod-dev-null", "refuse", special("mknod-null"))
    m("missing", "refuse", special("missing"))
    m("symlink-to-valid", "accept", special("symlink-ok"))

    def odd_name(suffix, exists):
        def fn(t, p):
            q = os.path.join(t, suffix)
            if exists:
                with open(q, "wb") as f:
                    f.write(valid())
            return q
        return fn
    m("name-esc-missing", "refuse", odd_name("in\x1b[31mred\x1b[0m.json", False), [["in", "red"]])
    m("name-rtl-missing", "refuse", odd_name("in" + RTL + "nosj.json", False), [["in"]])
    m("name-newline-missing", "refuse", odd_name("in\nnext.json", False), [["in"]])
    m("name-newline-exists", "accept", odd_name("ok\nname.json", True), [])
    m("name-long-5000", "refuse", odd_name("d" * 200 + "/" + ("n" * 250 + "/") * 19 + "f.json", False), [["nnn", "ddd"]])
    if is_json:
        m("top-array", "refuse", data(b"[]"))
        m("top-number-1e400", "refuse", data(b"1e400"))
        m("top-string", "refuse", data(b'"x"'))
        m("top-null", "refuse", data(b"null"))
        m("wrong-schema", "refuse", data(lambda: re.sub(rb'"schema"\s*:\s*"[^"]*"', b'"schema": "xstage.bogus/9"',
                                                        valid(), count=1)), [["schema", "bogus"]])
        m("no-schema", "any", data(lambda: re.sub(rb'"schema"\s*:\s*"[^"]*"\s*,', b"", valid(), count=1)))
        m("duplicate-key", "any", data(lambda: valid().replace(b"{", b'{"schema": "x", ', 1)))
        m("comments", "refuse", data(lambda: b"// comment\n" + valid()))
        m("big-string-10MB", "any", data(lambda: _big_string(valid(), 10 * 1024 * 1024)))
        m("octal-number", "refuse", data(lambda: _first_number(valid(), b"010")))
        m("hex-number", "refuse", data(lambda: _first_number(valid(), b"0x10")))
        m("esc-in-string", "any", data(lambda: _first_string(valid(), "\\u001b[31mRED\\u001b[0m\\u202e\\n\\u0000")))
    else:
        csv_mutations(m, data, valid, carrier["command"])
    return M


def _big_string(body: bytes, n: int) -> bytes:
    doc = json.loads(body)
    for key in ("description", "name", "source"):
        if isinstance(doc, dict) and key in doc:
            doc[key] = "A" * n
            return json.dumps(doc).encode()
    if isinstance(doc, dict):
        doc["zz_padding"] = "A" * n
    return json.dumps(doc).encode()


def _first_number(body: bytes, repl: bytes) -> bytes:
    return re.sub(rb"(:\s*)\d+(\.\d+)?", lambda mm: mm.group(1) + repl, body, count=1)


def _first_string(body: bytes, repl: str) -> bytes:
    """The first string value that is not the schema, replaced with repl (JSON escapes)."""
    doc_text = body.decode("utf-8")
    for mm in re.finditer(r'"(\w+)"\s*:\s*"([^"\\]*)"', doc_text):
        if mm.group(1) != "schema":
            return (doc_text[: mm.start(2)] + repl + doc_text[mm.end(2):]).encode()
    return body


def csv_mutations(m, data, valid, command):
    HEADER = "mode,target,producers,bytes_per_producer,gap_us,t_iss_us,t_period_us"
    cols = HEADER.split(",")

    def rows():
        return valid().decode().splitlines()

    def join(lines, nl="\n"):
        return (nl.join(lines) + nl).encode()

    whole = "refuse" if command == "fit" else "any"  # fidelity reports on whatever records there are
    m("header-only", whole, data(lambda: join(rows()[:1])))
    m("no-header", "refuse", data(lambda: join(rows()[1:])))
    m("blank-crlf-line", "any", data(lambda: join(rows()[:3] + [""] + rows()[3:], "\r\n")))
    m("blank-line", "any", data(lambda: join(rows()[:3] + [""] + rows()[3:])))
    m("bom-crlf", "any", data(lambda: b"\xef\xbb\xbf" + join(rows(), "\r\n")))
    m("extra-column", "refuse", data(lambda: join([r + ",1" for r in rows()])))
    m("missing-column", "refuse", data(lambda: join([r.rsplit(",", 1)[0] for r in rows()])))
    m("tab-separated", "refuse", data(lambda: join([r.replace(",", "\t") for r in rows()])))
    m("quoted-fields", "any", data(lambda: join(rows()[:1] + ['"' + r.replace(",", '","') + '"' for r in rows()[1:]])))
    m("trailing-comma", "refuse", data(lambda: join(rows()[:2] + [rows()[2] + ","] + rows()[3:])))
    m("only-gap-rows", whole, data(lambda: join(rows()[:1] + [r for r in rows()[1:] if r.split(",")[4] not in
                                                                 ("0", "0.0")])), [["records"], ["gap", "floor", "zero"]])
    m("only-local", whole, data(lambda: join(rows()[:1] + [r for r in rows()[1:] if ",local," in r])))
    m("duplicate-rows", "any", data(lambda: join(rows() + rows()[1:])))
    m("1e6-rows", "refuse", data(lambda: join(rows() + rows()[1:2] * 1000000)))
    m("long-line-10MB", "refuse", data(lambda: join(rows()[:2] + ["periodic,remote,16," + "9" * 10000000 + ",0,1,1"])))
    m("mode-unknown", "refuse", data(lambda: join(rows()[:1] + [rows()[1].replace("periodic", "sideways", 1)] +
                                                  rows()[2:])), [["records"], ["mode", "sideways"]])
    m("target-unknown", "refuse", data(lambda: join(rows()[:1] + [rows()[1].replace("remote", "elsewhere", 1)] +
                                                    rows()[2:])), [["records"], ["target", "elsewhere"]])
    m("esc-in-mode", "refuse", data(lambda: join(rows()[:1] + [rows()[1].replace("periodic", "\x1b[31mp\x1b[0m", 1)] +
                                                 rows()[2:])), [["records"]])
    values = [("1e400", "1e400", "refuse"), ("-1", "-1", "refuse"), ("nan", "nan", "refuse"), ("inf", "inf", "refuse"),
              ("empty", "", "refuse"), ("text", "abc", "refuse"), ("comma-decimal", "1,5", "refuse"),
              ("hex", "0x10", "refuse"), ("zero", "0", "any"), ("subnormal", "4e-320", "any"),
              ("1e308", "1e308", "any"), ("2^32+132", "4294967428", "any"), ("space", " 5", "any"),
              ("octal", "010", "any")]
    for ci in range(2, len(cols)):
        for label, value, expect in values:
            def body(ci=ci, value=value):
                lines = rows()
                fields = lines[2].split(",")
                fields[ci] = value
                return join(lines[:2] + [",".join(fields)] + lines[3:])
            m(f"col-{cols[ci]}-{label}", expect, data(body), [["records"], [cols[ci], ":3", "line 3"]])


def _numeric_paths(doc, path=(), seen=None, out=None):
    """First occurrence of each numeric key (by key name) as a path into doc."""
    if out is None:
        out, seen = [], set()
    if isinstance(doc, dict):
        for k, v in doc.items():
            if isinstance(v, bool):
                continue
            if isinstance(v, (int, float)):
                if k not in seen:
                    seen.add(k)
                    out.append((path + (k,), isinstance(v, int), v))
            else:
                _numeric_paths(v, path + (k,), seen, out)
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:3]):
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                key = path[-1] if path else "[]"
                if ("[]", key) not in seen:
                    seen.add(("[]", key))
                    out.append((path + (i,), isinstance(v, int), v))
            else:
                _numeric_paths(v, path + (i,), seen, out)
    return out


def _negatives(doc, out=None):
    """Keys that hold a negative number somewhere in doc (negative allowed there)."""
    if out is None:
        out = set()
    if isinstance(doc, dict):
        for k, v in doc.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v < 0:
                out.add(k)
            _negatives(v, out)
    elif isinstance(doc, list):
        for v in doc:
            _negatives(v, out)
    return out


COUNT_KEY = re.compile(r"(producers|count|repeat|chunks|k_steps|tokens|experts|top_k|block_[mn]|heads|head_dim|"
                       r"seq_len|bursts|^sms?$|_count|ordinal|grid|ranks|schedules|slots|folds|^k$)")

FIELD_VALUES = [  # label, JSON text, expectation ('refuse' / 'any'), int-only
    ("1e400", "1e400", "refuse"), ("-1", "-1", "neg"), ("zero", "0", "any"), ("NaN", "NaN", "refuse"),
    ("Infinity", "Infinity", "refuse"), ("2^31", "2147483648", "any"), ("2^32+132", "4294967428", "any"),
    ("1e308", "1e308", "any"), ("subnormal", "4e-320", "any"), ("string", '"7"', "any"), ("null", "null", "any"),
    ("1.5", "1.5", "int"), ("-2^31-1", "-2147483649", "neg"), ("1e6", "1000000", "any"),
]


def _set_path(doc, path, marker):
    node = doc
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = marker


def gen_files(max_fields):
    for carrier in _carriers():
        loader, command = carrier["loader"], carrier["command"]
        for label, expect, fn, names in _file_mutations(carrier):
            def setup(tmp, carrier=carrier, fn=fn, names=names):
                p = fn(tmp, os.path.join(tmp, carrier["name"]))
                argv = carrier["argv"](tmp, p)
                nm = names if names is not None else [[os.path.basename(p)[:40], carrier["name"]]]
                return {"argv": argv, "names": nm, "out": carrier["out"](tmp)}
            add(f"file:{loader}", command, expect, setup, note=f"{carrier['name']} {label}",
                timeout=carrier["timeout"])
        if not carrier["is_json"]:
            continue
        try:
            doc = json.loads(carrier["content"]())
        except ValueError:
            continue
        negatives = _negatives(doc)
        paths = _numeric_paths(doc)[:max_fields]
        for path, is_int, orig in paths:
            key = str(path[-1]) if not isinstance(path[-1], int) else str(path[-2])
            for label, text, cls in FIELD_VALUES:
                if cls == "int" and not is_int:
                    continue
                informational = "provenance" in path or "description" in path
                expect = {"refuse": "refuse", "any": "any",
                          "int": "refuse" if COUNT_KEY.search(key) and not informational else "any",
                          "neg": "any" if key in negatives or informational else "refuse"}[cls]

                def setup(tmp, carrier=carrier, path=path, text=text, key=key):
                    d = json.loads(carrier["content"]())
                    marker = "@@HOSTILE@@"
                    _set_path(d, path, marker)
                    body = json.dumps(d, indent=1).replace('"' + marker + '"', text)
                    p = write(tmp, carrier["name"], body)
                    return {"argv": carrier["argv"](tmp, p), "names": [[carrier["name"]], [key]],
                            "out": carrier["out"](tmp)}
                add(f"field:{loader}", command, expect, setup, note=f"{carrier['name']} {'/'.join(map(str, path))}="
                    f"{label}")


# --- paper --own folder ---------------------------------------------------------------------------------------------

def gen_own():
    for rel in ("moe/moe_matrix.json", "ulysses/ulysses.json"):
        for label, expect, kind in (("missing", "refuse", "rm"), ("fifo", "refuse", "fifo"), ("empty", "refuse", b""),
                                    ("deep-1e6", "refuse", _deep(1000000).encode()), ("junk", "refuse", b"\x01\x02junk"),
                                    ("1e400", "refuse", b'{"schema": 1e400}'), ("directory", "refuse", "dir"),
                                    ("dangling-symlink", "refuse", "dangling")):
            def setup(tmp, rel=rel, kind=kind):
                d = own_dir(tmp)
                p = os.path.join(d, rel)
                os.unlink(p)
                if kind == "fifo":
                    os.mkfifo(p)
                elif kind == "dir":
                    os.mkdir(p)
                elif kind == "dangling":
                    os.symlink(os.path.join(tmp, "nowhere.json"), p)
                elif isinstance(kind, bytes):
                    with open(p, "wb") as f:
                        f.write(kind)
                return {"argv": ["paper", "--platform", copy(tmp, PLAT_MEASURED), "--own", d],
                        "names": [[os.path.basename(rel)]]}
            add("file:paper-own", "paper", expect, setup, note=f"{rel} {label}", timeout=60)
    for label, kind in (("own-is-file", "file"), ("own-missing", "missing"), ("own-fifo", "fifo")):
        def setup(tmp, kind=kind):
            p = os.path.join(tmp, "ownx")
            if kind == "file":
                write(tmp, "ownx", b"{}")
            elif kind == "fifo":
                os.mkfifo(p)
            return {"argv": ["paper", "--platform", copy(tmp, PLAT_MEASURED), "--own", p], "names": [["ownx"]]}
        add("file:paper-own", "paper", "refuse", setup, note=label, timeout=60)


# --- outputs ---------------------------------------------------------------------------------------------------------

def _outputs():
    rec = corpus_text("records")
    O = []

    def o(command, option, argv, force="--force"):
        O.append(dict(command=command, option=option, argv=argv, force=force))

    o("fit", "--out", lambda t, p: ["fit", "--records", write(t, "records.csv", rec), "--out", p])
    o("fidelity", "--out", lambda t, p: ["fidelity", "--records", write(t, "records.csv", rec), "--out", p])
    o("paper", "--out", lambda t, p: ["paper", "--platform", copy(t, PLAT_PAPER), "--only", "knee", "--out", p])
    o("paper", "--text-out", lambda t, p: ["paper", "--platform", copy(t, PLAT_PAPER), "--only", "knee",
                                           "--text-out", p])
    o("simulate", "--trace", lambda t, p: ["simulate", "--platform", copy(t, PLAT_MEASURED), "--producers", "8", "--bytes-per-producer", "32768", "--gap-us",
                                           "2", "--bursts", "4", "--trace", p])
    o("plan moe", "--trace", lambda t, p: ["plan", "moe", "--platform", copy(t, PLAT_MEASURED), "--hidden", "512", "--h-inter", "256", "--experts", "16",
                                           "--top-k", "2", "--simulate", "--tokens", "64", "--trace", p])
    o("trace convert", "--out", lambda t, p: ["trace", "convert", "--from", "moe-bench",
                                              write(t, "dump.json", _DUMP_CACHE.get()), "--out", p])
    return O


class _Lazy:
    def __init__(self, fn):
        self.fn, self.v, self.lock = fn, None, threading.Lock()

    def get(self):
        with self.lock:
            if self.v is None:
                self.v = self.fn()
            return self.v


_DUMP_CACHE = _Lazy(_trace_dump)


def gen_outputs():
    for spec in _outputs():
        cmd, option, argv_of = spec["command"], spec["option"], spec["argv"]
        targets = [
            # label, expect, with --force, prepare(tmp) -> path, allowed outs (relative), names
            ("new-file", "accept", False, lambda t: os.path.join(t, "out.json"), ["out.json"]),
            ("existing-file", "refuse", False, lambda t: write(t, "out.json", b"{\"keep\": 1}\n"), []),
            ("existing-file-force", "accept", True, lambda t: write(t, "out.json", b"{\"keep\": 1}\n"), ["out.json"]),
            ("mknod-null", "refuse", False, lambda t: _mknod(t, "out.json", 3), []),
            ("mknod-null-force", "refuse", True, lambda t: _mknod(t, "out.json", 3), []),
            ("mknod-full-force", "refuse", True, lambda t: _mknod(t, "out.json", 7), []),
            ("dev-full-force", "refuse", True, lambda t: "/dev/full", []),
            ("dev-null-force", "any", True, lambda t: "/dev/null", []),
            ("symlink-to-file", "refuse", False, lambda t: _symlink(t, "out.json", write(t, "victim.json", b"{}\n")), []),
            ("symlink-to-file-force", "refuse", True,
             lambda t: _symlink(t, "out.json", write(t, "victim.json", b"{}\n")), []),
            ("dangling-symlink", "refuse", False, lambda t: _symlink(t, "out.json", os.path.join(t, "created.json")), []),
            ("dangling-symlink-force", "refuse", True,
             lambda t: _symlink(t, "out.json", os.path.join(t, "created.json")), []),
            ("fifo", "refuse", False, lambda t: _fifo(t, "out.json"), []),
            ("fifo-force", "refuse", True, lambda t: _fifo(t, "out.json"), []),
            ("directory", "refuse", False, lambda t: _mkdir(t, "out.json"), []),
            ("directory-force", "refuse", True, lambda t: _mkdir(t, "out.json"), []),
            ("empty-name", "refuse", False, lambda t: "", []),
            ("missing-dir", "refuse", False, lambda t: os.path.join(t, "no", "such", "out.json"), []),
            ("esc-name-missing-dir", "refuse", False, lambda t: os.path.join(t, "no\x1b[31m", "o" + RTL + ".json"), []),
            ("newline-name", "accept", False, lambda t: os.path.join(t, "out\nx.json"), ["out\nx.json"]),
            ("long-name-300", "refuse", False, lambda t: os.path.join(t, "n" * 300 + ".json"), []),
            ("long-path-5000", "refuse", False, lambda t: os.path.join(t, *(["d" * 200] * 25), "o.json"), []),
            ("hardlink-of-input-force", "refuse", True, lambda t: _hardlink_input(t), []),
            ("dot", "refuse", True, lambda t: ".", []),
            ("umask-077", "accept", False, lambda t: os.path.join(t, "out.json"), ["out.json"]),
            ("umask-027-force", "accept", True, lambda t: write(t, "out.json", b"{}\n"), ["out.json"]),
        ]
        for label, expect, force, prep, allowed in targets:
            def setup(tmp, argv_of=argv_of, prep=prep, force=force, allowed=allowed, label=label, option=option):
                if label == "hardlink-of-input-force":
                    p = os.path.join(tmp, "out.json")
                    argv = argv_of(tmp, p)
                    src = [a for a in argv if a != p and os.path.isfile(a)][0]
                    os.link(src, p)
                else:
                    p = prep(tmp)
                    argv = argv_of(tmp, p)
                if force:
                    argv = argv + ["--force"]
                r = {"argv": argv, "out": [os.path.join(tmp, a) for a in allowed],
                     "names": [[option, os.path.basename(p)[:30] if p else option, "out", "trace"]]}
                if label.startswith("umask-077"):
                    r["umask"] = 0o077
                elif label.startswith("umask-027"):
                    r["umask"] = 0o027
                if label == "hardlink-of-input-force":
                    r["names"] = [[option, "input"]]
                return r
            add(f"out:{label}", cmd, expect, setup, note=f"{option} {label}")
        # --out equal to an input
        def setup_same(tmp, argv_of=argv_of):
            argv = argv_of(tmp, os.path.join(tmp, "PLACEHOLDER"))
            inputs = [a for a in argv if os.path.isfile(a)]
            i = argv.index(os.path.join(tmp, "PLACEHOLDER"))
            argv[i] = inputs[0] if inputs else os.path.join(tmp, "PLACEHOLDER")
            return {"argv": argv + ["--force"], "names": [[os.path.basename(argv[i])]]}
        add("out:same-as-input-force", cmd, "refuse", setup_same, note=f"{option} = an input, --force")


def _mknod(t, name, minor):
    p = os.path.join(t, name)
    os.mknod(p, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
    return p


def _symlink(t, name, target):
    p = os.path.join(t, name)
    os.symlink(target, p)
    return p


def _fifo(t, name):
    p = os.path.join(t, name)
    os.mkfifo(p)
    return p


def _mkdir(t, name):
    p = os.path.join(t, name)
    os.mkdir(p)
    return p


def _hardlink_input(t):
    """A hard link to the command's first input-like file written so far (records.csv or platform)."""
    for cand in ("records.csv", "paper_8gpu_148sm.json", "dump.json"):
        src = os.path.join(t, cand)
        if os.path.exists(src):
            break
    else:
        src = write(t, "records.csv", corpus_text("records"))
    p = os.path.join(t, "out.json")
    os.link(src, p)
    return p


# --- stdout on /dev/full or closed ----------------------------------------------------------------------------------

def gen_stdout():
    cmds = [
        ("model", lambda t: base_model(t)), ("model", lambda t: base_model(t) + ["--json"]),
        ("simulate", lambda t: base_simulate(t)), ("simulate", lambda t: base_simulate(t) + ["--json"]),
        ("plan", lambda t: ["plan"]), ("plan", lambda t: ["plan", "--json"]),
        ("plan attn", lambda t: ["plan", "attn"]), ("plan moe", lambda t: base_plan_moe(t)),
        ("plan moe", lambda t: base_plan_moe_sim(t) + ["--json"]),
        ("fit", lambda t: base_fit(t)), ("fit", lambda t: base_fit(t) + ["--json"]),
        ("fidelity", lambda t: base_fidelity(t)), ("fidelity", lambda t: base_fidelity(t) + ["--json"]),
        ("paper", lambda t: base_paper(t)), ("paper", lambda t: base_paper(t) + ["--json"]),
        ("xstage", lambda t: ["--help"]), ("xstage", lambda t: ["--version"]), ("model", lambda t: ["model", "--help"]),
        ("simulate", lambda t: ["simulate", "--kernel", copy(t, os.path.join(KERNEL_BG, "gemm-reduce-scatter.json"))]),
    ]
    for mode in ("devfull", "closed"):
        for command, builder in cmds:
            def setup(tmp, builder=builder, mode=mode):
                argv = builder(tmp)
                return {"argv": argv, "stdout": mode, "out": [a for a in argv if a.endswith("fitted.json")],
                        "names": [["stdout", "write", "output", "No space", "Bad file"]]}
            add(f"stdout:{mode}", command, "refuse", setup, note=f"stdout {mode}")


# --- text options: long values and terminal escapes -----------------------------------------------------------------

def gen_text():
    texts = [("esc", ESC_SEQ), ("newline", "a\nb"), ("rtl", "ab" + RTL + "cd"), ("cr", "a\rb"), ("bel", "a\x07b"),
             ("c1-csi", "a\u009b31mb"), ("long-120k", "L" * 120000), ("tab", "a\tb")]
    for label, text in texts:
        # fit --name: the name is written into the platform; then printed by model/plan from that platform
        def setup_name(tmp, text=text):
            argv = base_fit(tmp) + ["--name", text]
            return {"argv": argv, "out": [os.path.join(tmp, "fitted.json")]}
        add("text:fit-name", "fit", "any", setup_name, note=f"--name {label}")

        def setup_platname(tmp, text=text):
            d = json.loads(read(PLAT_MEASURED))
            d["name"] = text
            p = write(tmp, "platform.json", json.dumps(d))
            return {"argv": ["plan", "attn", "--platform", p]}
        add("text:platform-name", "plan attn", "any", setup_platname, note=f"platform name {label}")

        def setup_platname_model(tmp, text=text):
            d = json.loads(read(PLAT_MEASURED))
            d["name"] = text
            p = write(tmp, "platform.json", json.dumps(d))
            return {"argv": ["model", "--platform", p] + base_model(tmp)[1:]}
        add("text:platform-name", "model", "any", setup_platname_model, note=f"platform name {label}")

        def setup_kname(tmp, text=text):
            d = json.loads(read(KERNEL_MOE))
            d["name"] = text
            p = write(tmp, "kernel.json", json.dumps(d))
            return {"argv": ["plan", "moe", "--kernel", p]}
        add("text:kernel-name", "plan moe", "any", setup_kname, note=f"kernel name {label}")

        for command, argv in (("plan moe", ["plan", "moe", "--shape", text]), ("plan moe", ["plan", "moe", "--kernel", text]),
                              ("plan moe", ["plan", "moe", "--shape", "deepseek-v3", "--simulate", "--routing", text]),
                              ("plan moe", ["plan", "moe", "--shape", "deepseek-v3", "--precision", text]),
                              ("plan moe", ["plan", "moe", "--shape", "deepseek-v3", "--simulate", "--combine", text]),
                              ("paper", ["paper", "--platform", PLAT_PAPER, "--only", text]),
                              ("model", ["model", "--platform", text, "--producers", "4", "--bytes-per-producer", "4096"]),
                              ("fit", ["fit", "--records", text, "--out", "/nonexistent-dir/x.json"]),
                              ("xstage", [text]), ("model", ["model", "--" + text])):
            flag = argv[-2] if len(argv) >= 2 and argv[-1] == text else [a for a in argv if a.startswith("--")][0] \
                if argv[0] in ("model", "fit") and argv[1] != "--" + text else None

            def setup(tmp, argv=argv, flag=flag):
                a = [x.replace(PLAT_PAPER, copy(tmp, PLAT_PAPER)) if x == PLAT_PAPER else x for x in argv]
                names = [[flag]] if flag else [["unknown command", "unknown option"]]
                return {"argv": a, "names": names}
            where = flag or ("a command" if len(argv) == 1 else "an option")
            add("text:args", command, "refuse", setup, note=f"{' '.join(argv[:2])} {where} <{label}>")


# --- signals during writes ------------------------------------------------------------------------------------------

def gen_signals():
    writers = [
        ("simulate", lambda t, p: ["simulate", "--producers", "512", "--bytes-per-producer", "32768", "--gap-us", "2",
                                   "--bursts", "60", "--trace", p]),
        ("plan moe", lambda t, p: ["plan", "moe", "--shape", "qwen3-235b-a22b", "--simulate", "--tokens", "4096",
                                   "--trace", p]),
        ("trace convert", lambda t, p: ["trace", "convert", "--from", "moe-bench",
                                        write(t, "dump.json", _DUMP_CACHE.get()), "--out", p]),
        ("fit", lambda t, p: ["fit", "--records", copy(t, os.path.join(CAL, "records.csv")), "--out", p]),
    ]
    for command, argv_of in writers:
        for sig in (signal.SIGINT, signal.SIGTERM):
            for delay in (0.0, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05):
                def setup(tmp, argv_of=argv_of, sig=sig, delay=delay):
                    p = os.path.join(tmp, "out.json")
                    return {"argv": argv_of(tmp, p), "out": [p], "signal": sig, "delay": delay}
                add(f"signal:{sig.name}", command, "any", setup, kind="signal",
                    note=f"{sig.name} {delay * 1000:g} ms after the write began")


# --- concurrent writers ---------------------------------------------------------------------------------------------

def gen_races():
    for command, argv_of, n in (
            ("trace convert", lambda t, p: ["trace", "convert", "--from", "moe-bench",
                                            write(t, "dump.json", _DUMP_CACHE.get()), "--out", p], 2),
            ("simulate", lambda t, p: ["simulate", "--producers", "64", "--bytes-per-producer", "32768", "--bursts",
                                       "8", "--trace", p], 2),
            ("paper", lambda t, p: ["paper", "--platform", copy(t, PLAT_PAPER), "--only", "knee", "--out", p], 2),
            ("simulate", lambda t, p: ["simulate", "--producers", "64", "--bytes-per-producer", "32768", "--bursts",
                                       "8", "--trace", p], 8)):
        for trial in range(12):
            def setup(tmp, argv_of=argv_of, n=n):
                p = os.path.join(tmp, "out.json")
                return {"argv": argv_of(tmp, p), "out": [p], "writers": n, "force": False}
            add(f"race:{n}-writers", command, "any", setup, kind="race", note=f"{n} writers, no --force, trial {trial}")
    for trial in range(6):
        def setup(tmp):
            p = os.path.join(tmp, "out.json")
            write(tmp, "out.json", b"{}\n")
            return {"argv": ["simulate", "--producers", "64", "--bytes-per-producer", "32768", "--bursts", "8",
                             "--trace", p, "--force"], "out": [p], "writers": 12, "force": True}
        add("race:12-force-writers", "simulate", "any", setup, kind="race", note=f"12 --force writers, trial {trial}")


# --- the Python planner ---------------------------------------------------------------------------------------------

PY_CASES = [
    # label, expression (xp = xstage.planner, np = numpy or None), expect, names
    ("model float", "xp.model(producers=132, bytes_per_producer=32768.5, gap_us=2.5)", "accept", []),
    ("model np.float64", "xp.model(producers=132, bytes_per_producer=np.float64(32768), gap_us=np.float64(2.5))",
     "accept", []),
    ("model np.int64", "xp.model(producers=np.int64(132), bytes_per_producer=32768, gap_us=2)", "accept", []),
    ("model np.float32", "xp.model(producers=132, bytes_per_producer=np.float32(32768), gap_us=np.float32(0.1))",
     "accept", []),
    ("model np.int32 0-d array", "xp.model(producers=np.array(132, dtype=np.int32), bytes_per_producer=32768)", "any",
     []),
    ("model Fraction", "xp.model(producers=132, bytes_per_producer=fractions.Fraction(65537, 2), gap_us=2)", "any", []),
    ("model Decimal", "xp.model(producers=132, bytes_per_producer=decimal.Decimal('32768.5'), gap_us=2)", "any", []),
    ("model nan", "xp.model(producers=132, bytes_per_producer=float('nan'))", "refuse", [["bytes_per_producer"]]),
    ("model np.nan", "xp.model(producers=132, bytes_per_producer=np.nan)", "refuse", [["bytes_per_producer"]]),
    ("model inf", "xp.model(producers=132, bytes_per_producer=32768, gap_us=float('inf'))", "refuse", [["gap_us"]]),
    ("model 1e308", "xp.model(producers=132, bytes_per_producer=1e308)", "refuse", [["bytes_per_producer"]]),
    ("model 10**30 producers", "xp.model(producers=10**30, bytes_per_producer=32768)", "refuse", [["producers"]]),
    ("model 2**32+132 producers", "xp.model(producers=2**32+132, bytes_per_producer=32768)", "refuse",
     [["producers"]]),
    ("model np.int64 2**40", "xp.model(producers=np.int64(2**40), bytes_per_producer=32768)", "refuse",
     [["producers"]]),
    ("model -1 producers", "xp.model(producers=-1, bytes_per_producer=32768)", "refuse", [["producers"]]),
    ("model 0 producers", "xp.model(producers=0, bytes_per_producer=32768)", "refuse", [["producers"]]),
    ("model bool producers", "xp.model(producers=True, bytes_per_producer=32768)", "any", []),
    ("model 1.5 producers", "xp.model(producers=1.5, bytes_per_producer=32768)", "refuse", [["producers"]]),
    ("model str producers", "xp.model(producers='132', bytes_per_producer=32768)", "any", []),
    ("model str junk", "xp.model(producers='12abc', bytes_per_producer=32768)", "refuse", [["producers"]]),
    ("model esc str", "xp.model(producers='\\x1b[31m1', bytes_per_producer=32768)", "refuse", [["producers"]]),
    ("model None required", "xp.model(producers=None, bytes_per_producer=32768)", "refuse", [["producers"]]),
    ("model list", "xp.model(producers=[1, 2], bytes_per_producer=32768)", "refuse", [["producers"]]),
    ("model dict", "xp.model(producers={}, bytes_per_producer=32768)", "refuse", [["producers"]]),
    ("model unknown kw", "xp.model(producers=132, bytes_per_producer=32768, bogus=1)", "refuse", [["bogus"]]),
    ("model complex", "xp.model(producers=132, bytes_per_producer=1j)", "refuse", [["bytes_per_producer"]]),
    ("model subnormal", "xp.model(producers=132, bytes_per_producer=32768, gap_us=4e-320)", "any", []),
    ("model long str 1MB", "xp.model(producers='1'*1000000, bytes_per_producer=32768)", "refuse", [["producers"]]),
    ("simulate np", "xp.simulate(producers=np.int64(16), bytes_per_producer=np.float64(32768), gap_us=np.float64(2),"
     " bursts=np.int64(6))", "accept", []),
    ("simulate bursts 1e9", "xp.simulate(producers=16, bytes_per_producer=32768, bursts=10**9)", "refuse", [["bursts"]]),
    ("simulate latency w/o coupled", "xp.simulate(producers=16, bytes_per_producer=32768, latency_us=3)", "refuse",
     [["latency_us"]]),
    ("plan_attn np", "xp.plan_attn(sigma_us=np.float64(1.7), seq=[np.int64(8192), 16384])", "accept", []),
    ("plan_attn seq nan", "xp.plan_attn(seq=[float('nan')])", "refuse", [["seq"]]),
    ("plan_moe np", "xp.plan_moe(shape='deepseek-v3', t_l1_us=np.float64(3.0))", "accept", []),
    ("plan_moe routing fifo", "xp.plan_moe(shape='deepseek-v3', simulate=True, routing=FIFO)", "refuse",
     [["fifo", "routing"]]),
    ("plan_moe kernel deep", "xp.plan_moe(kernel=DEEP)", "refuse", [["deep"]]),
    ("plan_moe routing w/o simulate", "xp.plan_moe(shape='deepseek-v3', routing='/nonexistent', ranks=9999)", "refuse",
     [["routing", "ranks", "simulate"]]),
    ("plan_moe tokens 2**31", "xp.plan_moe(shape='deepseek-v3', simulate=True, tokens=2**31)", "refuse", [["tokens"]]),
    ("load_platform deep", "xp.load_platform(DEEP)", "refuse", [["deep"]]),
    ("load_platform fifo", "xp.load_platform(FIFO)", "refuse", [["fifo"]]),
    ("load_platform 1e400", "xp.load_platform(E400)", "refuse", [["e400"]]),
    ("run fidelity deep traces", "xp.run_json(['fidelity'], records=REC, traces=[DEEP])", "refuse", [["deep"]]),
    ("run fidelity fifo raw", "xp.run_json(['fidelity'], records=REC, raw=FIFO)", "refuse", [["fifo"]]),
    ("run fidelity block_n 0", "xp.run_json(['fidelity'], records=REC, ulysses=ULY0)", "refuse", [["block_n"]]),
    ("run model esc platform name", "xp.run('model', '--platform', ESCPLAT, '--producers', '4', '--bytes-per-producer',"
     " '4096')", "any", []),
    ("flags np", "xp.flags(gap_us=np.float64(0.154), producers=np.int64(3))", "accept", []),
]


def gen_python(have_numpy):
    for locale_name in ("C", "de_DE.UTF-8"):
        for label, expr, expect, names in PY_CASES:
            if "np." in expr and not have_numpy:
                continue

            def setup(tmp, expr=expr, names=names, locale_name=locale_name):
                return {"expr": expr, "names": names, "locale": locale_name}
            add(f"python:{locale_name}", "python planner", expect, setup, kind="python",
                note=f"{label} [LC_NUMERIC={locale_name}]")


PY_SCRIPT = r"""
import json, os, sys, locale, fractions, decimal
sys.setrecursionlimit(10000)
out = {}
try:
    import numpy as np
except ImportError:
    np = None
loc = os.environ.get("HOSTILE_LOCALE", "C")
if loc != "C":
    try:
        locale.setlocale(locale.LC_NUMERIC, loc)
        out["locale"] = locale.setlocale(locale.LC_NUMERIC)
    except locale.Error as e:
        out["locale_error"] = str(e)
import xstage.planner as xp
T = os.environ["HOSTILE_TMP"]
FIFO = os.path.join(T, "fifo.json"); os.mkfifo(FIFO)
DEEP = os.path.join(T, "deep.json"); open(DEEP, "w").write("[" * 1000000 + "]" * 1000000)
E400 = os.path.join(T, "e400.json"); open(E400, "w").write('{"schema": "xstage.platform/1", "drain_rate_gbps": 1e400}')
REC = os.environ["HOSTILE_REC"]
ULY0 = os.environ["HOSTILE_ULY0"]
ESCPLAT = os.environ["HOSTILE_ESCPLAT"]
try:
    value = eval(os.environ["HOSTILE_EXPR"])
    text = json.dumps(value, default=str, allow_nan=True)
    out["result"] = text[:2000]
    out["nonfinite"] = bool(__import__("re").search(r"\b(NaN|Infinity|inf|nan)\b", text))
    out["comma_decimal"] = bool(__import__("re").search(r"\d,\d{3}\b", text)) and loc != "C"
except (ValueError, TypeError) as e:
    out["refused"] = type(e).__name__
    out["message"] = str(e)
except Exception as e:
    out["error"] = type(e).__name__
    out["message"] = str(e)
sys.stdout.write("\n@@HOSTILE@@" + json.dumps(out) + "\n")
"""


# --- the planner's typed C ABI (include/xstage/planner/planner_c_api.h) ---------------------------------------------
# Each of its seven entry points called through ctypes with hostile request text: values of the wrong type, huge and
# non-finite numbers, deep nesting, invalid UTF-8, megabyte strings, missing and unknown keys, text that is not JSON.
# A refusal must be status 2 with a one-line message naming the key (and where a value is not JSON, saying so; "request"
# where the text is no object); no call may crash or hang; a success must be valid JSON with finite numbers.

CAPI_BASES = {
    # entry point: (the smallest valid request, keys fed hostile values, the key a request without arguments misses)
    "model": ({"producers": 16, "bytes_per_producer": 4096}, ["producers", "bytes_per_producer", "gap_us", "platform"],
              "producers"),
    "simulate": ({"producers": 16, "bytes_per_producer": 4096, "bursts": 4}, ["bursts", "gap_us", "schedule"], None),
    "plan": ({}, ["producers", "platform"], None),
    "plan_attn": ({}, ["seq", "sigma_us", "block_m"], None),
    "plan_moe": ({"shape": "deepseek-v3", "simulate": True, "tokens": 256}, ["shape", "tokens", "hidden", "routing"],
                 "tile_bytes"),
    "fit": ({"records": "@REC", "link_gbps": 450, "link_source": "x"}, ["records", "link_gbps", "sms", "raw"],
            "records"),
    "fidelity": ({"records": "@REC", "cross_validate": True}, ["records", "traces", "folds", "platform"], "records"),
}

# value variants as raw JSON text (bytes); all refused for every key above but where CAPI_MAY_ACCEPT says otherwise
CAPI_VALUES = [
    ("string", b'"abc"'),
    ("list", b"[1]"),
    ("object", b'{"a": 1}'),
    ("bool", b"true"),
    ("negative", b"-1"),
    ("1e308", b"1e308"),
    ("1e400", b"1e400"),
    ("2**64", b"18446744073709551616"),
    ("-2**63-1", b"-9223372036854775809"),
    ("deep array", b"[" * 100000 + b"]" * 100000),
    ("deep object", b'{"a":' * 20000 + b"1" + b"}" * 20000),
    ("1MB string", b'"' + b"9" * 1000000 + b'"'),
    ("esc string", b'"\\u001b[31mred\\u202e"'),
    ("non-UTF-8 string", b'"\xff\xfe\xc3("'),
    ("NaN", b"NaN"),
    ("Infinity", b"-Infinity"),
]
CAPI_MAY_ACCEPT = {("seq", "list"), ("shape", "esc string")}


def _capi_request(base, key, value):
    """The request text: `base` with `key` set to the raw JSON `value` (placeholders resolved by the script)."""
    body = json.dumps({k: v for k, v in base.items() if k != key}).encode()[1:-1]
    return b"{" + body + (b", " if body else b"") + json.dumps(key).encode() + b": " + value + b"}"


def gen_capi():
    for entry, (base, keys, required) in CAPI_BASES.items():
        cases = []
        for key in keys:
            for label, value in CAPI_VALUES:
                # text that is not JSON: the message says so and names the argument whose value it was
                invalid_json = label in ("NaN", "Infinity", "non-UTF-8 string", "1e400")
                names = [["json"], [key]] if invalid_json else [[key]]
                expect = "any" if (key, label) in CAPI_MAY_ACCEPT else "refuse"
                cases.append((f"{key}={label}", _capi_request(base, key, value), expect, names))
        if required:
            cases.append(("missing keys", b"{}", "refuse", [[required]]))
        cases += [
            ("unknown key", _capi_request(base, "bogus_key", b"1"), "refuse", [["bogus_key"]]),
            ("non-UTF-8 key", _capi_request(base, "\udcff", b"1").replace("\\udcff".encode(), b"\xff"), "refuse",
             [["request", "json"]]),
            ("esc key", _capi_request(base, "\x1b[31m\u202e", b"1"), "refuse", [["31m"]]),
            ("not an object", b"[1, 2]", "refuse", [["object"]]),
            ("deep top level", b"[" * 200000 + b"]" * 200000, "refuse", [["object"]]),
            ("empty text", b"", "refuse", [["request", "json"]]),
            ("trailing text", json.dumps(base).encode() + b" x", "refuse", [["request", "json"]]),
            ("truncated", json.dumps(base).encode()[:-1], "refuse", [["request", "json"]]),
            ("NUL inside", json.dumps(base).encode()[:-1] + b"\x00}", "refuse", [["request", "json"]]),
            ("null pointer", None, "refuse", [["request"]]),
        ]
        for label, request, expect, names in cases:
            def setup(tmp, entry=entry, request=request, names=names):
                return {"entry": entry, "request": request, "names": names}
            add(f"capi:{entry}", f"xstage_planner_{entry}", expect, setup, kind="capi", note=label)


CAPI_SCRIPT = r"""
import base64, ctypes, json, os, sys
lib = ctypes.CDLL(os.environ["XSTAGE_CAPI_LIBRARY"])
entry = getattr(lib, "xstage_planner_" + os.environ["HOSTILE_ENTRY"])
entry.restype = ctypes.c_int
entry.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p)]
lib.xstage_planner_free.argtypes = [ctypes.c_void_p]
path = os.environ.get("HOSTILE_REQUEST")
request = None
if path:
    with open(path, "rb") as f:
        request = f.read().replace(b"@REC", os.environ["HOSTILE_REC"].encode())
out, err = ctypes.c_void_p(), ctypes.c_void_p()
code = entry(request, ctypes.byref(out), ctypes.byref(err))
def take(p):
    if not p.value:
        return None
    data = ctypes.string_at(p.value)
    lib.xstage_planner_free(p)
    return base64.b64encode(data).decode()
sys.stdout.write("\n@@HOSTILE@@" + json.dumps({"code": code, "response": take(out), "error": take(err)}) + "\n")
"""


# ----------------------------------------------------------------------------------------------------------------
# Running and classifying


def snapshot(root):
    """path -> (kind, mode, size, inode, digest or link target or rdev), recursive, no link following."""
    snap = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            mode = st.st_mode
            if stat.S_ISLNK(mode):
                snap[p] = ("link", 0, 0, st.st_ino, os.readlink(p))
            elif stat.S_ISREG(mode):
                if st.st_size <= 4 * 1024 * 1024:
                    with open(p, "rb") as f:
                        dig = hashlib.sha1(f.read()).hexdigest()
                else:
                    dig = f"big:{st.st_size}:{st.st_mtime_ns}"
                snap[p] = ("file", stat.S_IMODE(mode), st.st_size, st.st_ino, dig)
            elif stat.S_ISDIR(mode):
                snap[p] = ("dir", stat.S_IMODE(mode), 0, st.st_ino, "")
            elif stat.S_ISFIFO(mode):
                snap[p] = ("fifo", stat.S_IMODE(mode), 0, st.st_ino, "")
            elif stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
                snap[p] = ("dev", stat.S_IMODE(mode), 0, st.st_ino, str(st.st_rdev))
            else:
                snap[p] = ("other", 0, 0, st.st_ino, "")
    return snap


def diff(before, after):
    changes = []
    for p, v in after.items():
        if p not in before:
            changes.append(("created", p, v[0]))
        elif before[p] != v:
            b = before[p]
            what = "replaced" if b[0] != v[0] or b[3] != v[3] and b[0] != "file" else "changed"
            changes.append((what, p, f"{b[0]}->{v[0]}"))
    for p, v in before.items():
        if p not in after:
            changes.append(("removed", p, v[0]))
    return changes


def message_problems(stderr: bytes, names):
    problems = []
    try:
        text = stderr.decode("utf-8")
    except UnicodeDecodeError:
        problems.append("stderr is not valid UTF-8")
        text = stderr.decode("utf-8", "replace")
    lines = [ln for ln in text.rstrip("\n").split("\n")]
    errs = [ln for ln in lines if not re.match(r"^xstage: warning:", ln)]
    body = "\n".join(errs)
    if not body.strip():
        problems.append("no message on stderr")
        return problems
    if len(errs) != 1:
        problems.append(f"{len(errs)} lines on stderr")
    if len(body.encode("utf-8", "surrogateescape")) > 600:
        problems.append(f"{len(body.encode('utf-8', 'surrogateescape'))} bytes")
    if CTRL.search(body.replace("\t", "")) or "\x1b" in body:
        problems.append("raw control bytes")
    if BIDI.search(body):
        problems.append("raw bidi override")
    low = body.lower()
    for group in names or []:
        alts = set()
        for alt in group:
            if alt:
                alts.add(alt.lower())
                bare = alt.lower().lstrip("-")
                if alt.startswith("--") and bare:
                    alts.update({bare.replace("-", "_")})
        if not any(a in low for a in alts):
            problems.append("does not name " + " / ".join(repr(a[:40]) for a in group[:3]))
    return problems


def output_problems(stdout: bytes, stderr: bytes):
    problems = []
    for label, data in (("stdout", stdout), ("stderr", stderr)):
        t = data.decode("utf-8", "replace")
        if "\x1b" in t or CTRL.search(t.replace("\t", "").replace("\r\n", "\n")):
            problems.append(f"raw control bytes in {label}")
        if BIDI.search(t):
            problems.append(f"raw bidi override in {label}")
    return problems


COMMAND_WORDS = {"model", "plan", "attn", "moe", "simulate", "fit", "fidelity", "paper", "trace", "convert"}


def argv_words(argv):
    """What a message may name of a command line: its flags (also as field names), values that are words, and the
    base names of its paths."""
    words = []
    for a in argv:
        if a.startswith("--"):
            words += [a, a[2:].replace("-", "_")]
        elif "/" in a:
            words.append(os.path.basename(a))
        elif len(a) >= 3 and a not in COMMAND_WORDS and not re.fullmatch(r"[-+0-9.eE,x ]+", a):
            words.append(a)
    return [w for w in words if w]


def bounded(s, n=300):
    s = s if isinstance(s, str) else s.decode("utf-8", "replace")
    s = s.encode("unicode_escape").decode("ascii")
    return s if len(s) <= n else s[:n] + f"...(+{len(s) - n} chars)"


def cmdline(cli, argv):
    return bounded(" ".join(shlex.quote(a) for a in [os.path.basename(cli)] + argv), 400)


class Runner:
    def __init__(self, cli, timeout, workroot, pyenv):
        self.cli, self.timeout, self.workroot, self.pyenv = cli, timeout, workroot, pyenv

    def run(self, case):
        tmp = tempfile.mkdtemp(prefix=f"{case.cid}_", dir=self.workroot)
        try:
            return self._run(case, tmp)
        except Exception as e:  # a harness error is reported, never hidden
            return {"category": "harness_error", "reasons": [f"{type(e).__name__}: {e}"], "rc": None,
                    "cmd": "", "seconds": 0}
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _popen(self, argv, spec, stdout=subprocess.PIPE):
        umask = spec.get("umask")

        def pre():
            if umask is not None:
                os.umask(umask)
            if spec.get("stdout") == "closed":
                os.close(1)
        env = dict(os.environ, LC_ALL="C.UTF-8")
        env.update(spec.get("env", {}))
        return subprocess.Popen([self.cli] + argv, stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.PIPE,
                                preexec_fn=pre, env=env, start_new_session=True)

    def _wait(self, proc, timeout):
        try:
            out, err = proc.communicate(timeout=timeout)
            return proc.returncode, out or b"", err or b"", False
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, err = proc.communicate()
            return proc.returncode, out or b"", err or b"", True

    def _run(self, case, tmp):
        spec = case.setup(tmp)
        timeout = case.timeout or self.timeout
        if case.kind == "python":
            return self._run_python(case, spec, tmp, timeout)
        if case.kind == "capi":
            return self._run_capi(case, spec, tmp, timeout)
        argv = spec["argv"]
        outs = set(spec.get("out", []))
        before = snapshot(tmp)
        t0 = time.monotonic()
        reasons, category = [], "ok"
        if case.kind == "race":
            n = spec["writers"]
            procs = [self._popen(argv, spec) for _ in range(n)]
            results = [self._wait(p, timeout) for p in procs]
            rc = [r[0] for r in results]
            hung = any(r[3] for r in results)
            stdout = b"".join(r[1] for r in results)
            stderr = b"".join(r[2] for r in results)
            winners = sum(1 for r in rc if r == 0)
        else:
            devfull = None
            stdout_arg = subprocess.PIPE
            if spec.get("stdout") == "devfull":
                devfull = open("/dev/full", "wb")
                stdout_arg = devfull
            elif spec.get("stdout") == "closed":
                stdout_arg = subprocess.DEVNULL  # closed again in the child before exec
            proc = self._popen(argv, spec, stdout_arg)
            if devfull:
                devfull.close()
            sent = False
            if case.kind == "signal":
                # wait for the write to begin (the first new entry in the case's folder: a temp file or the
                # output itself), then the case's delay, then the signal
                names0 = set(os.listdir(tmp))
                deadline = time.monotonic() + timeout
                while proc.poll() is None and time.monotonic() < deadline and set(os.listdir(tmp)) == names0:
                    time.sleep(0.0005)
                time.sleep(spec["delay"])
                if proc.poll() is None:
                    os.kill(proc.pid, spec["signal"])
                    sent = True
            rc, stdout, stderr, hung = self._wait(proc, timeout)
        seconds = time.monotonic() - t0
        after = snapshot(tmp)
        changes = diff(before, after)
        result = {"cmd": cmdline(self.cli, argv), "rc": rc, "seconds": round(seconds, 3),
                  "stderr": bounded(stderr, 400)}
        rcs = rc if isinstance(rc, list) else [rc]

        # crash
        if not hung:
            for r in rcs:
                if r is None:
                    continue
                if case.kind == "signal" and sent and r in (-spec["signal"], 128 + spec["signal"], 1, 2):
                    continue
                if r < 0:
                    reasons.append(f"killed by {signal.Signals(-r).name}")
                elif r not in (0, 1, 2):
                    reasons.append(f"exit code {r}")
            if reasons:
                category = "crash"
        if category == "ok" and hung:
            category, reasons = "hang", [f"no exit after {timeout:g} s"]
        # wrong writes
        if category == "ok":
            ok_all = all(r == 0 for r in rcs)
            for what, p, kind in changes:
                rel = os.path.relpath(p, tmp)
                if case.kind == "race":
                    if p in outs and kind in ("file", "file->file") and what in ("created", "changed"):
                        continue
                    reasons.append(f"{what} {bounded(rel, 80)} ({kind})")
                elif case.kind == "signal" and p in outs and what == "created" and kind == "file" and sent_ok(p):
                    continue  # the signal came after the output was complete (checked below)
                elif not ok_all:
                    reasons.append(f"{what} {bounded(rel, 80)} ({kind}) although exit {rc}")
                elif p not in outs or what == "replaced" or kind not in ("file",) and what != "changed":
                    if not (p in outs and what in ("created", "changed") and kind in ("file", "file->file")):
                        reasons.append(f"{what} {bounded(rel, 80)} ({kind})")
            if case.kind == "signal":
                for p in outs:
                    if os.path.lexists(p) and not sent_ok(p):
                        reasons.append(f"partial output {os.path.basename(p)} after {spec['signal'].name}")
            if "umask" in spec and ok_all:
                for what, p, kind in changes:
                    if p in outs and os.path.isfile(p):
                        mode = stat.S_IMODE(os.lstat(p).st_mode)
                        if mode & spec["umask"]:
                            reasons.append(f"{os.path.basename(p)} mode {mode:04o} under umask {spec['umask']:04o}")
            if spec.get("stdout") in ("devfull", "closed") and ok_all:
                reasons.append(f"exit 0 with stdout {spec['stdout']}")
            if case.kind == "race" and not spec["force"] and winners > 1:
                reasons.append(f"{winners} of {len(rcs)} writers without --force exited 0")
            if case.kind == "race":
                for p in outs:
                    if os.path.lexists(p) and not sent_ok(p):
                        reasons.append("final output is not valid JSON")
            if reasons:
                category = "wrong_write"
        # accepted
        if category == "ok" and case.kind == "plain":
            if rc == 0 and case.expect == "refuse" and spec.get("stdout") not in ("devfull", "closed"):
                category, reasons = "accepted", ["exit 0 where a refusal is expected"]
            elif rc == 0:
                nf = NONFINITE_OUT.search(stdout.decode("utf-8", "replace"))
                if nf and not re.search(r"\bnan\b|\binf\b", " ".join(argv), re.IGNORECASE):
                    category, reasons = "accepted", [f"exit 0 printing a non-finite number ({nf.group(0)})"]
        # unclear
        if category == "ok":
            if case.kind == "plain" and rc in (1, 2) and spec.get("stdout") not in ("devfull", "closed"):
                names = spec.get("names")
                if case.expect != "refuse" and names:
                    # a refusal of a value not judged bad may come from a consequence (another field, the work
                    # it sizes): the message must still name something that was fed, any argument or file
                    names = [sum(names, []) + argv_words(argv)]
                reasons = message_problems(stderr, names)
                if case.expect == "accept":
                    reasons.insert(0, f"refused (exit {rc}) where success is expected")
            elif case.kind == "plain" and rc in (1, 2):
                reasons = [p for p in message_problems(stderr, None)]
            if case.kind in ("plain",):
                reasons += output_problems(stdout, stderr)
            if reasons:
                category = "unclear"
        result.update(category=category, reasons=reasons)
        return result

    def _run_capi(self, case, spec, tmp, timeout):
        env = dict(os.environ)
        env.update(self.pyenv)
        env.update(HOSTILE_ENTRY=spec["entry"], HOSTILE_REC=write(tmp, "rec.csv", corpus_text("records")))
        if spec["request"] is not None:
            env["HOSTILE_REQUEST"] = write(tmp, "request.json", spec["request"])
        t0 = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-c", CAPI_SCRIPT], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env, start_new_session=True)
        rc, out, err, hung = self._wait(proc, timeout)
        shown = bounded(spec["request"] or b"(null)", 200)
        res = {"cmd": f"xstage_planner_{spec['entry']}({shown})", "rc": rc, "seconds": round(time.monotonic() - t0, 3),
               "stderr": bounded(err[-400:], 400)}
        text = out.decode("utf-8", "replace")
        report = json.loads(text.rsplit("@@HOSTILE@@", 1)[1]) if "@@HOSTILE@@" in text else None
        reasons = []
        if hung:
            category, reasons = "hang", [f"no return after {timeout:g} s"]
        elif rc != 0 or report is None:
            category = "crash"
            reasons = [f"interpreter killed by {signal.Signals(-rc).name}" if rc < 0 else f"interpreter exit {rc}"]
        else:
            import base64
            code = report["code"]
            response = base64.b64decode(report["response"]) if report["response"] is not None else None
            message = base64.b64decode(report["error"]) if report["error"] is not None else None
            res["status"] = code
            res["message"] = bounded(message or b"", 600)
            category = "ok"
            if code not in (0, 1, 2):
                category, reasons = "crash", [f"status {code}"]
            elif (code == 0) != (response is not None) or (code == 0) == (message is not None):
                category, reasons = "unclear", ["not exactly one of response and error set"]
            elif code == 0:
                if case.expect == "refuse":
                    category, reasons = "accepted", ["status 0 where a refusal is expected"]
                else:
                    try:
                        json.loads(response, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
                    except ValueError as e:
                        category, reasons = "unclear", [f"response is not finite JSON ({bounded(str(e), 80)})"]
            else:
                probs = message_problems(message + b"\n", spec["names"])
                if code != 2:
                    probs.insert(0, f"status {code} (not 2, bad input)")
                if case.expect == "accept":
                    probs.insert(0, "refused where success is expected")
                if probs:
                    category, reasons = "unclear", probs
        res.update(category=category, reasons=reasons)
        return res

    def _run_python(self, case, spec, tmp, timeout):
        env = dict(os.environ)
        env.update(self.pyenv)
        env.update(HOSTILE_EXPR=spec["expr"], HOSTILE_TMP=tmp, HOSTILE_LOCALE=spec["locale"],
                   HOSTILE_REC=write(tmp, "rec.csv", corpus_text("records")),
                   HOSTILE_ULY0=write(tmp, "uly0.json", corpus_text("ulysses").replace(b'"block_n": 128',
                                                                                      b'"block_n": 0')),
                   HOSTILE_ESCPLAT=write(tmp, "escplat.json", json.dumps(dict(json.loads(read(PLAT_MEASURED)),
                                                                              name=ESC_SEQ + RTL))))
        env.pop("LC_ALL", None)
        t0 = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-c", PY_SCRIPT], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env, start_new_session=True)
        rc, out, err, hung = self._wait(proc, timeout)
        res = {"cmd": f"python3: {bounded(spec['expr'], 300)} [LC_NUMERIC={spec['locale']}]", "rc": rc,
               "seconds": round(time.monotonic() - t0, 3), "stderr": bounded(err[-400:], 400)}
        text = out.decode("utf-8", "replace")
        report = None
        if "@@HOSTILE@@" in text:
            report = json.loads(text.rsplit("@@HOSTILE@@", 1)[1])
        reasons = []
        if hung:
            category, reasons = "hang", [f"no exit after {timeout:g} s"]
        elif rc != 0 or report is None:
            category = "crash"
            reasons = [f"interpreter killed by {signal.Signals(-rc).name}" if rc < 0 else f"interpreter exit {rc}"]
            if report is None and rc == 1:
                category, reasons = "harness_error", ["no report: " + bounded(err[-300:], 300)]
        else:
            category = "ok"
            res["report"] = {k: (bounded(v, 300) if isinstance(v, str) else v) for k, v in report.items()}
            if "locale_error" in report:
                res["note"] = "locale not available: " + report["locale_error"]
            if "error" in report:
                category, reasons = "unclear", [f"raised {report['error']} (not ValueError/TypeError)"] + \
                    message_problems(report["message"].encode(), spec["names"])
            elif "refused" in report:
                probs = message_problems(report["message"].encode(), spec["names"])
                if case.expect == "accept":
                    probs.insert(0, f"refused ({report['refused']}) where success is expected")
                if probs:
                    category, reasons = "unclear", probs
            else:
                if case.expect == "refuse":
                    category, reasons = "accepted", ["returned where a refusal is expected"]
                elif report.get("nonfinite") and "nan" not in spec["expr"] and "inf" not in spec["expr"]:
                    category, reasons = "accepted", ["result holds a non-finite number"]
                elif report.get("comma_decimal"):
                    category, reasons = "unclear", ["comma-decimal number in the result"]
        res.update(category=category, reasons=reasons)
        return res


def sent_ok(p):
    """True where p is a complete output: valid JSON (or a non-JSON text that is non-empty)."""
    try:
        with open(p, "rb") as f:
            data = f.read()
    except OSError:
        return False
    if not data:
        return False
    try:
        json.loads(data)
        return True
    except ValueError:
        return not data.lstrip().startswith((b"{", b"["))


CATEGORIES = ["crash", "hang", "wrong_write", "accepted", "unclear", "ok", "harness_error"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir", help="folder for summary.json, summary.txt and cases.jsonl")
    ap.add_argument("--cli", default=os.path.join(REPO, "build", "xstage"))
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds per case; past it the case is a hang")
    ap.add_argument("--jobs", type=int, default=max(2, (os.cpu_count() or 2)))
    ap.add_argument("--only", default="", help="comma-separated group prefixes (e.g. arg-values,out:,python)")
    ap.add_argument("--max-fields", type=int, default=10, help="numeric fields mutated per JSON input")
    ap.add_argument("--python-path", default=os.path.join(REPO, "python"),
                    help="folder holding the xstage package for the Python planner cases")
    ap.add_argument("--capi", default="", help="libxstage_capi.so (default: next to --cli)")
    ap.add_argument("--cli-library", default="", help="libxstage_cli.so (default: next to --cli)")
    ap.add_argument("--no-python", action="store_true")
    ap.add_argument("--limit-list", type=int, default=400, help="non-ok cases listed per category in summary.txt")
    args = ap.parse_args()

    cli = os.path.abspath(args.cli)
    if not os.access(cli, os.X_OK):
        sys.exit(f"run_hostile: {cli} is not an executable")
    # a private copy, so a rebuild during the run cannot change the binary under test
    workroot = tempfile.mkdtemp(prefix="xstage_hostile_")
    private = os.path.join(workroot, "xstage")
    shutil.copy2(cli, private)
    version = subprocess.run([private, "--version"], capture_output=True, text=True).stdout.strip()
    with open(private, "rb") as f:
        version += "\nsha256: " + hashlib.sha256(f.read()).hexdigest()
    capi = args.capi or os.path.join(os.path.dirname(cli), "libxstage_capi.so")
    cli_library = args.cli_library or os.path.join(os.path.dirname(cli), "libxstage_cli.so")

    gen_args()
    gen_combos()
    gen_files(args.max_fields)
    gen_own()
    gen_outputs()
    gen_stdout()
    gen_text()
    gen_signals()
    gen_races()
    python_note = ""
    pyenv = {}
    if not args.no_python:
        private_capi = os.path.join(workroot, "libxstage_capi.so")
        private_cli_library = os.path.join(workroot, "libxstage_cli.so")
        for source, copy in ((capi, private_capi), (cli_library, private_cli_library)):
            if os.path.exists(source):
                shutil.copy2(source, copy)
        pyenv = {"PYTHONPATH": os.path.abspath(args.python_path), "XSTAGE_CAPI_LIBRARY": private_capi,
                 "XSTAGE_CLI_LIBRARY": private_cli_library}
        probe = subprocess.run([sys.executable, "-c", "import xstage.planner as xp; "
                                "xp.model(producers=4, bytes_per_producer=4096)"],
                               env=dict(os.environ, **pyenv), capture_output=True, text=True)
        if probe.returncode == 0:
            try:
                import numpy  # noqa: F401
                have_numpy = True
            except ImportError:
                have_numpy = False
            gen_python(have_numpy)
            gen_capi()
            python_note = f"python package {args.python_path}, library {capi}, numpy {'yes' if have_numpy else 'no'}"
        else:
            python_note = "Python planner cases skipped: " + bounded(probe.stderr.strip().splitlines()[-1:] or ["?"], 300)
        # a comma-decimal locale for the planner cases: compiled into a private LOCPATH if the system lacks it
        locdir = os.path.join(workroot, "locale")
        if subprocess.run(["localedef", "-i", "de_DE", "-f", "UTF-8", os.path.join(locdir, "de_DE.UTF-8")],
                          capture_output=True).returncode in (0, 1) and os.path.isdir(locdir):
            pyenv["LOCPATH"] = locdir
    if args.only:
        prefixes = [p for p in args.only.split(",") if p]
        CASES[:] = [c for c in CASES if any(c.group.startswith(p) for p in prefixes)]
    for i, c in enumerate(CASES):
        c.cid = f"c{i:05d}"

    runner = Runner(private, args.timeout, workroot, pyenv)
    started = datetime.datetime.now(datetime.timezone.utc)
    results = [None] * len(CASES)
    # slow or timing-sensitive kinds run alone after the rest, so load from parallel cases does not skew them
    parallel = [i for i, c in enumerate(CASES) if c.kind not in ("signal", "race")]
    serial = [i for i, c in enumerate(CASES) if c.kind in ("signal", "race")]
    done = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futs = {pool.submit(runner.run, CASES[i]): i for i in parallel}
        for fut in concurrent.futures.as_completed(futs):
            results[futs[fut]] = fut.result()
            done += 1
            if done % 100 == 0:
                print(f"run_hostile: {done}/{len(CASES)}", file=sys.stderr, flush=True)
    for i in serial:
        results[i] = runner.run(CASES[i])
    finished = datetime.datetime.now(datetime.timezone.utc)
    shutil.rmtree(workroot, ignore_errors=True)

    write_summary(args, cli, version, python_note, started, finished, results)


def write_summary(args, cli, version, python_note, started, finished, results):
    os.makedirs(args.outdir, exist_ok=True)
    per_cat = collections.Counter(r["category"] for r in results)
    per_cmd = collections.defaultdict(collections.Counter)
    per_group = collections.defaultdict(collections.Counter)
    per_subgroup = collections.defaultdict(collections.Counter)
    for c, r in zip(CASES, results):
        per_cmd[c.command][r["category"]] += 1
        per_group[c.group.split(":")[0]][r["category"]] += 1
        per_subgroup[c.group][r["category"]] += 1
    rev = subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    # The revision the binary was built from, as its --version states it ("git revision: SHORT (FULL[-dirty.DIFF])").
    built = re.search(r"git revision: \S+ \(([0-9a-f]{40})(-dirty(?:\.[0-9a-f]{12})?)?\)", version)
    failures = []
    for c, r in zip(CASES, results):
        if r["category"] != "ok":
            failures.append({"id": c.cid, "category": r["category"], "group": c.group, "command": c.command,
                             "case": bounded(c.note, 200), "expect": c.expect, "cmd": r.get("cmd", ""),
                             "rc": r.get("rc"), "reasons": [bounded(x, 200) for x in r.get("reasons", [])][:6],
                             "stderr": r.get("stderr", "")})
    summary = {
        "schema": "xstage.hostile/1",
        "provenance": {
            "binary": cli, "binary_version": version, "repository_head": rev,
            "git_revision": built.group(1) if built else None, "dirty": bool(built and built.group(2)),
            "started_utc": started.isoformat(timespec="seconds"), "finished_utc": finished.isoformat(timespec="seconds"),
            "command": " ".join(shlex.quote(a) for a in [sys.executable.split("/")[-1]] + sys.argv),
            "timeout_s": args.timeout, "jobs": args.jobs, "python": python_note, "host": os.uname().nodename,
        },
        "categories": {k: per_cat.get(k, 0) for k in CATEGORIES},
        "cases": len(results),
        "per_command": {k: dict(v) for k, v in sorted(per_cmd.items())},
        "per_group": {k: dict(v) for k, v in sorted(per_group.items())},
        "per_subgroup": {k: dict(v) for k, v in sorted(per_subgroup.items())},
        "failures": failures,
    }
    with open(os.path.join(args.outdir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1, ensure_ascii=True)
        f.write("\n")
    with open(os.path.join(args.outdir, "cases.jsonl"), "w") as f:
        for c, r in zip(CASES, results):
            f.write(json.dumps({"id": c.cid, "group": c.group, "command": c.command, "case": bounded(c.note, 200),
                                "expect": c.expect, "category": r["category"], "rc": r.get("rc"),
                                "seconds": r.get("seconds"), "reasons": r.get("reasons", [])[:4]},
                               ensure_ascii=True) + "\n")
    lines = [f"xstage hostile-input round (issue #47): {len(results)} cases",
             f"binary: {cli}", *("  " + v for v in version.splitlines() if v.startswith(("git", "sha", "xstage"))), f"repository HEAD: {rev}",
             f"run: {summary['provenance']['started_utc']} .. {summary['provenance']['finished_utc']}",
             f"command: {summary['provenance']['command']}", f"python: {python_note}", "",
             "per category:"]
    lines += [f"  {k:13s} {per_cat.get(k, 0):6d}" for k in CATEGORIES]
    cols = CATEGORIES
    lines += ["", "per command:", "  " + f"{'command':16s}" + "".join(f"{c[:11]:>12s}" for c in cols) + f"{'total':>8s}"]
    for k, v in sorted(per_cmd.items()):
        lines.append("  " + f"{k:16s}" + "".join(f"{v.get(c, 0):12d}" for c in cols) + f"{sum(v.values()):8d}")
    lines += ["", "per group:", "  " + f"{'group':24s}" + "".join(f"{c[:11]:>12s}" for c in cols) + f"{'total':>8s}"]
    for k, v in sorted(per_group.items()):
        lines.append("  " + f"{k:24s}" + "".join(f"{v.get(c, 0):12d}" for c in cols) + f"{sum(v.values()):8d}")
    for cat in CATEGORIES:
        if cat == "ok":
            continue
        items = [x for x in failures if x["category"] == cat]
        if not items:
            continue
        lines += ["", f"{cat} ({len(items)}):"]
        for x in items[: args.limit_list]:
            lines.append(f"  [{x['id']}] {x['group']} | {x['case']} | rc={x['rc']} | {'; '.join(x['reasons'])}")
            lines.append(f"      $ {x['cmd']}")
            if x["stderr"]:
                lines.append(f"      stderr: {bounded(x['stderr'], 240)}")
        if len(items) > args.limit_list:
            lines.append(f"  ... {len(items) - args.limit_list} more in summary.json")
    with open(os.path.join(args.outdir, "summary.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines[: 12 + len(CATEGORIES)]))


if __name__ == "__main__":
    main()
