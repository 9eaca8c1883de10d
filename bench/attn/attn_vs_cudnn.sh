#!/usr/bin/env bash
# Runs on the GPU machine: our attention forward kernel, FlashAttention-4's Hopper forward (when
# flash_attn.cute is importable: put its install on PYTHONPATH) and PyTorch SDPA (cuDNN backend, and the
# FlashAttention-2 backend unless ATTN_BENCH_ARGS has --no-flash2) on the same shapes in one run; writes
# results JSON (with SM clock and power per timed loop) and a TFLOP/s plot.
# Usage: bench/attn/attn_vs_cudnn.sh [OUT_DIR] (default results/h200/attn); XSTAGE=path/to/xstage overrides the CLI.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$root/results/h200/attn}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
xstage=${XSTAGE:-$root/build/xstage}
python3 "$root/bench/attn/attn_vs_cudnn.py" --xstage "$xstage" --json "$out/attn_forward.json" \
  --plot "$out/attn_forward.png" ${ATTN_BENCH_ARGS:-}
