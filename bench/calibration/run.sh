#!/usr/bin/env bash
# The one entry point of the calibration benchmarks: bench/calibration/run.sh WHAT [ARGS...] runs the script for WHAT
# with ARGS; every knob is an environment variable, listed per script in bench/README.md.
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
case "${1:-}" in
  device) shift; exec bash "$here/calibrate_device.sh" "$@" ;;
  *) echo "usage: $0 {device} [ARGS...] (see bench/README.md)" >&2; exit 2 ;;
esac
