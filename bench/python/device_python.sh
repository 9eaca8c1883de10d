#!/usr/bin/env bash
# On the GPU machine: installs the carried wheels (the xstage wheel and what the image lacks) into
# /tmp/site, then runs, each bounded by a timeout and teed under $OUT:
#   python_gpu_tests.txt   pytest over tests/python (the GPU tests run, the CPU ones too)
#   attn_overhead.json     bench/python/attn_overhead.py (per-call cost of xstage.attention)
#   moe_vs_torch.json      bench/python/moe_vs_torch.py (FusedMoE vs the PyTorch layer, bf16 and FP8)
#   cpp_gpu_tests.txt      the C++ GPU tests, when GPUBIN (an xz tar of build/xstage and
#                          build/tests/xstage_gpu_tests) is carried; compute-sanitizer over FILTER too
#   WHEELS  folder of wheels (default .whl-dif)   GPUBIN  (default .gpubin/gpubin.tar.xz)
#   STEPS   which of tests,overhead,moe,cpp to run (default all)
#   XSTAGE_GIT_REVISION  (environment) recorded in the benchmarks' JSON (the device has no .git)
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/common/device_env.sh
WHEELS=${WHEELS:-.whl-dif} GPUBIN=${GPUBIN:-.gpubin/gpubin.tar.xz} STEPS=${STEPS:-tests,overhead,moe,cpp}
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  "$WHEELS"/*.whl || { echo "device_python: wheels in $WHEELS did not install" >&2; exit 1; }
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
status=0
step() { [[ ",$STEPS," == *",$1,"* ]]; }
note() { echo "device_python: $*"; }
# The carried CLI also serves the planner tests (XSTAGE_CLI), which compare the bindings with it.
if [ -f "$GPUBIN" ]; then
  mkdir -p /tmp/gb && tar xJf "$GPUBIN" -C /tmp/gb && export XSTAGE_CLI=/tmp/gb/xstage
fi
if step tests; then
  timeout 480 python3 -m pytest -q -rs -p no:cacheprovider tests/python 2>&1 | tee "$OUT/python_gpu_tests.txt"
  rc=${PIPESTATUS[0]}; note "pytest exit $rc"; [ "$rc" -eq 0 ] || status=1
fi
if step overhead; then
  timeout 180 python3 bench/python/attn_overhead.py --out "$OUT/attn_overhead.json" 2>&1 | tail -30
  rc=${PIPESTATUS[0]}; note "attn_overhead exit $rc"; [ "$rc" -eq 0 ] || status=1
fi
if step moe; then
  timeout 300 python3 bench/python/moe_vs_torch.py --out "$OUT/moe_vs_torch.json" 2>&1 | tail -40
  rc=${PIPESTATUS[0]}; note "moe_vs_torch exit $rc"; [ "$rc" -eq 0 ] || status=1
fi
if step cpp && [ -f "$GPUBIN" ]; then
  (timeout 420 /tmp/gb/tests/xstage_gpu_tests --gtest_brief=1 2>&1; echo "exit $?") | tail -60 >"$OUT/cpp_gpu_tests.txt"
  tail -5 "$OUT/cpp_gpu_tests.txt"
  grep -q "^exit 0$" "$OUT/cpp_gpu_tests.txt" || status=1
  if [ -n "${FILTER:-}" ]; then
    sanitize_gpu_tests /tmp/gb/tests/xstage_gpu_tests "$FILTER" 240 2>&1 | tee "$OUT/sanitizer.txt"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  fi
fi
exit $status
