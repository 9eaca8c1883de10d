#!/usr/bin/env bash
# The one entry point of the attention benchmarks: bench/attn/run.sh WHAT [ARGS...] runs the script for WHAT
# with ARGS; every knob is an environment variable or option, listed per script in bench/README.md.
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
case "${1:-}" in
  vs-peers) shift; exec bash "$here/attn_vs_cudnn.sh" "$@" ;;
  peers-pack) shift; exec bash "$here/peers_pack.sh" "$@" ;;
  peers-device) shift; exec bash "$here/peers_device.sh" "$@" ;;
  tune) shift; exec python3 "$here/attn_tune.py" "$@" ;;
  fp8) shift; exec python3 "$here/attn_fp8.py" "$@" ;;
  fp8-error-model) shift; exec python3 "$here/fp8_error_model.py" "$@" ;;
  sass-census) shift; exec python3 "$here/sass_census.py" "$@" ;;
  *) echo "usage: $0 {vs-peers|peers-pack|peers-device|tune|fp8|fp8-error-model|sass-census} [ARGS...] (see bench/README.md)" >&2; exit 2 ;;
esac
