#!/usr/bin/env bash
# The one entry point of the attention benchmarks: bench/attn/run.sh WHAT [ARGS...] runs the script for WHAT
# with ARGS; every knob is an environment variable or option, listed per script in bench/README.md.
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
case "${1:-}" in
  vs-peers) shift; exec bash "$here/attn_vs_cudnn.sh" "$@" ;;
  tune) shift; exec python3 "$here/attn_tune.py" "$@" ;;
  *) echo "usage: $0 {vs-peers|tune} [ARGS...] (see bench/README.md)" >&2; exit 2 ;;
esac
