"""Shared by the bench plot scripts: reading one results JSON of a known schema and its rows, with a
one-line error naming the file (and nothing written) when it cannot be used."""
import json
import sys


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
