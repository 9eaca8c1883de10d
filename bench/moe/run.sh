#!/usr/bin/env bash
# The one entry point of the moe benchmarks: bench/moe/run.sh WHAT [ARGS...] runs the script for WHAT
# with ARGS; every knob is an environment variable, listed per script in bench/README.md.
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
case "${1:-}" in
  device) shift; exec bash "$here/moe_device.sh" "$@" ;;
  matrix) shift; exec bash "$here/moe_matrix.sh" "$@" ;;
  ab) shift; exec bash "$here/moe_ab.sh" "$@" ;;
  gemm-alone) shift; exec bash "$here/moe_gemm_alone.sh" "$@" ;;
  lead-sweep) shift; exec bash "$here/moe_lead_sweep.sh" "$@" ;;
  ncu) shift; exec bash "$here/moe_ncu.sh" "$@" ;;
  stress) shift; exec bash "$here/moe_stress.sh" "$@" ;;
  *) echo "usage: $0 {device|matrix|ab|gemm-alone|lead-sweep|ncu|stress} [ARGS...] (see bench/README.md)" >&2; exit 2 ;;
esac
