"""bench/attn/ncu_sass_regions.py on a small synthetic Nsight Compute source export: region sums, the top list,
and its refusals of bad arguments and files."""
import csv
import lzma
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
TOOL = REPO / "bench" / "attn" / "ncu_sass_regions.py"
HDR = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Warp Stall Sampling (Not-issued Samples)",
       "stall_wait", "stall_barrier", "stall_wait (Not Issued)"]


def write_csv(path, rows, xz=False):
    opener = (lambda p: lzma.open(p, "wt", newline="")) if xz else (lambda p: open(p, "w", newline=""))
    with opener(path) as f:
        w = csv.writer(f)
        w.writerow(["Kernel Name", "k"])
        w.writerow(HDR)
        for addr, src, samples, wait, barrier in rows:
            w.writerow([hex(0x7f0000001000 + addr), src, samples, 0, wait, barrier, 0])


def run(*args):
    return subprocess.run([sys.executable, str(TOOL), *map(str, args)], capture_output=True, text=True)


ROWS = [(0x00, "MOV R1, R2", 10, 10, 0), (0x10, "BAR.SYNC R2", 30, 0, 30),
        (0x20, "MUFU.EX2 R3, R3", 40, 40, 0), (0x30, "@P0 BRA 0x10", 20, 5, 15)]


def test_regions_and_top(tmp_path):
    f = tmp_path / "a.csv.xz"
    write_csv(f, ROWS, xz=True)
    p = run(f, "--cuts", "0,20,40", "--names", "head,tail")
    assert p.returncode == 0, p.stderr
    lines = {ln.split()[0]: ln.split() for ln in p.stdout.splitlines()[1:3]}
    # head: 10 + 30 of 100 samples; tail: 40 + 20.
    assert lines["head"][1:3] == ["2", "40.0%"] and lines["tail"][1:3] == ["2", "60.0%"]
    assert "barrier 75" in p.stdout and "wait 75" in p.stdout  # head: barrier 30 / 40; tail: wait 45 / 60
    assert "regions hold 100.0% of all 100 samples" in p.stdout
    t = run(f, "--top", "2", "--range", "10,30")
    assert t.returncode == 0, t.stderr
    top = t.stdout.splitlines()
    assert len(top) == 2 and "MUFU.EX2" in top[0] and "BAR.SYNC" in top[1]


def test_refuses_bad_input(tmp_path):
    f = tmp_path / "a.csv"
    write_csv(f, ROWS)
    cases = [
        ((f,), "give --cuts and --names, or --top N"),
        ((f, "--cuts", "20,10", "--names", "x"), "--cuts: offsets must increase, got '20,10'"),
        ((f, "--cuts", "0,zz", "--names", "x"), "--cuts: expected comma-separated hex offsets, got '0,zz'"),
        ((f, "--cuts", "0,10,20", "--names", "x"), "--names: 2 names needed for 3 cuts, got 1"),
        ((f, "--top", "-1"), "--top: must be >= 0, got -1"),
        ((f, "--top", "2", "--range", "10"), "--range: expected two hex offsets 'lo,hi', got '10'"),
        ((f, "--cuts", "0,20", "--names", "x", "--range", "0,10"), "--range: only with --top N"),
        ((tmp_path / "missing.csv", "--top", "1"), "missing.csv"),
    ]
    for args, msg in cases:
        p = run(*args)
        assert p.returncode == 2 and msg in p.stderr, (args, p.stderr)
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    p = run(other, "--top", "1")
    assert p.returncode == 2 and "no header row starting with 'Address'" in p.stderr
    bad = tmp_path / "bad.csv"
    write_csv(bad, ROWS)
    bad.write_text(bad.read_text().replace(",30,0,0,30,", ",thirty,0,0,30,"))
    p = run(bad, "--top", "1")
    assert p.returncode == 2 and "line 4: not an address and sample counts" in p.stderr, p.stderr
