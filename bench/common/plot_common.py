"""Shared by the bench plot scripts: their command line (one results JSON, the PNG to write, an optional
note for the title), reading the JSON of a known schema and its rows, with a one-line error naming the
file (and nothing written) when it cannot be used, and writing the figure."""
import argparse
import json
import sys


def plot_args(doc, json_arg, note_help="appended to the title"):
    """Parses JSON_ARG OUT_PNG [--note TEXT]; the description is the first line of `doc`."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument(json_arg)
    ap.add_argument("out_png")
    ap.add_argument("--note", default="", help=note_help)
    return ap.parse_args()


def title_note(note):
    """The title's suffix for a --note (empty without one)."""
    return f"; {note}" if note else ""


def save_figure(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    print(f"wrote {path}")


def load_rows(path, schema, prog, keep, what):
    """The JSON at `path` and its rows for which keep(row) is true; exits naming `prog` when the file
    cannot be read, its schema is not `schema`, or no row is kept (`what` says which rows count)."""
    try:
        with open(path) as f:
            j = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"{prog}: cannot read {path}: {e}")
    if j.get("schema") != schema:
        sys.exit(f"{prog}: {path}: schema is {j.get('schema')!r}, expected {schema!r}")
    rows = [r for r in j.get("rows", []) if keep(r)]
    if not rows:
        sys.exit(f"{prog}: {path}: no {what}")
    return j, rows
