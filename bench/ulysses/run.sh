#!/usr/bin/env bash
# The one entry point of the ulysses benchmarks: bench/ulysses/run.sh WHAT [ARGS...] runs the script for WHAT
# with ARGS; every knob is an environment variable, listed per script in bench/README.md.
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
case "${1:-}" in
  sweep) shift; exec bash "$here/ulysses_sweep.sh" "$@" ;;
  diag-one-gpu) shift; exec bash "$here/ulysses_diag_one_gpu.sh" "$@" ;;
  *) echo "usage: $0 {sweep|diag-one-gpu} [ARGS...] (see bench/README.md)" >&2; exit 2 ;;
esac
