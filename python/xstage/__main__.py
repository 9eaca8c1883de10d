"""The xstage command line in Python: `xstage ARGS...` (the wheel's console script) and `python -m xstage ARGS...`
run the CLI's commands (model, plan, simulate, calibrate, ...) in process through libxstage_cli.so's xstage_cli_run:
the same commands, output and exit codes as the CLI built by scripts/build.sh."""

import sys as _sys
import typing as _typing

__all__ = ["main"]


def main(argv: _typing.Sequence[str] | None = None) -> int:
    """Runs `xstage ARGS...` (ARGS: `argv`, default sys.argv[1:]); prints its output and returns its exit code."""
    from . import _native, planner

    args = list(_sys.argv[1:] if argv is None else argv)
    try:
        code, out, err = planner._run_raw(args)
    except _native.XstageLoadError as e:
        print(e, file=_sys.stderr)
        return 1
    _sys.stdout.write(out)
    _sys.stdout.flush()
    _sys.stderr.write(err)
    if code == -1:  # the call itself failed (its reason is in err, written above)
        return 1
    return code


if __name__ == "__main__":
    _sys.exit(main())
