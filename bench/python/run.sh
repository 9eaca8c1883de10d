#!/usr/bin/env bash
# The one entry point of the python benchmarks: bench/python/run.sh WHAT [ARGS...] runs the script for WHAT
# with ARGS; every knob is an environment variable, listed per script in bench/README.md.
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
case "${1:-}" in
  tests) shift; exec bash "$here/device_python.sh" "$@" ;;
  diffusers) shift; exec bash "$here/diffusers_device.sh" "$@" ;;
  distributed) shift; exec bash "$here/distributed_device.sh" "$@" ;;
  fetch-wheels) shift; exec bash "$here/fetch_wheels.sh" "$@" ;;
  *) echo "usage: $0 {tests|diffusers|distributed|fetch-wheels} [ARGS...] (see bench/README.md)" >&2; exit 2 ;;
esac
