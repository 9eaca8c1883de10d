"""bench/attn/sass_census.py on a small synthetic cuobjdump listing: the innermost loop holding a warpgroup GEMM is
found and counted, --range overrides it, and bad arguments and files are refused naming what is wrong."""
import json
import lzma
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
TOOL = REPO / "bench" / "attn" / "sass_census.py"

# An outer loop (0x0010-0x00c0) around an inner one (0x0030-0x0090) that holds the GEMMs; a second, GEMM-free
# inner loop (0x00a0-0x00b0) is shorter but must not be chosen.
LISTING = """
\t\tFunction : _Z6kernelv
        /*0000*/                   MOV R1, c[0x0][0x28] ;                /* 0x0000 */
        /*0010*/                   IADD3 R2, R2, 0x1, RZ ;               /* 0x0000 */
        /*0020*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;         /* 0x0000 */
        /*0030*/                   QGMMA.64x128x32.F32.E4M3.E4M3 R24, R152, gdesc[UR16], R24 ; /* 0x0000 */
        /*0040*/                   FFMA R3, R4, R5, R6 ;                 /* 0x0000 */
        /*0050*/                   MUFU.EX2 R3, R3 ;                     /* 0x0000 */
        /*0060*/              @!P1 FMUL R7, R7, R3 ;                    /* 0x0000 */
        /*0070*/                   FFMA R8, R4, R5, R6 ;                 /* 0x0000 */
        /*0080*/                   IGMMA.64x128x32.S8.S8 R88, gdesc[UR24], R88 ; /* 0x0000 */
        /*0090*/               @P0 BRA 0x30 ;                           /* 0x0000 */
        /*00a0*/                   FADD R9, R9, R9 ;                     /* 0x0000 */
        /*00b0*/               @P2 BRA 0xa0 ;                           /* 0x0000 */
        /*00c0*/               @P3 BRA 0x10 ;                           /* 0x0000 */
        /*00d0*/                   EXIT ;                                /* 0x0000 */
\t\tFunction : _Z5otherv
        /*0000*/                   EXIT ;                                /* 0x0000 */
"""


def run(*args):
    return subprocess.run([sys.executable, str(TOOL), *map(str, args)], capture_output=True, text=True)


def test_innermost_gemm_loop_is_counted(tmp_path):
    f = tmp_path / "k.sass.xz"
    with lzma.open(f, "wt") as out:
        out.write(LISTING)
    p = run(f, "--function", "kernel", "--json")
    assert p.returncode == 0, p.stderr
    (r,) = json.loads(p.stdout)["functions"]
    assert r["function"] == "_Z6kernelv" and r["range"] == ["0030", "0090"] and r["instructions"] == 7
    assert r["opcodes"] == {"FFMA": 2, "QGMMA.64x128x32.F32.E4M3.E4M3": 1, "MUFU.EX2": 1, "FMUL": 1,
                            "IGMMA.64x128x32.S8.S8": 1, "BRA": 1}


def test_range_overrides_the_loop(tmp_path):
    f = tmp_path / "k.sass"
    f.write_text(LISTING)
    p = run(f, "--function", "_Z6kernelv", "--range", "a0,c0")
    assert p.returncode == 0, p.stderr
    assert "loop 00a0-00c0: 3 instructions" in p.stdout and "1 FADD" in p.stdout


def test_refusals(tmp_path):
    f = tmp_path / "k.sass"
    f.write_text(LISTING)
    cases = [
        ((tmp_path / "missing.sass", "--function", "k"), "missing.sass"),
        ((f, "--function", "("), "--function: not a regular expression"),
        ((f, "--function", "nothing_here"), "matches none of the 2 functions"),
        ((f, "--function", "other"), "_Z5otherv: no loop holds a warpgroup GEMM; give --range"),
        ((f, "--function", "kernel", "--range", "c0,a0"), "--range: lo must not exceed hi"),
        ((f, "--function", "kernel", "--range", "zz"), "--range: expected two hex offsets"),
    ]
    for args, message in cases:
        p = run(*args)
        assert p.returncode == 2 and message in p.stderr, (args, p.stderr)
    text = tmp_path / "notes.txt"
    text.write_text("no functions here\n")
    p = run(text, "--function", "k")
    assert p.returncode == 2 and "no 'Function :' sections" in p.stderr
