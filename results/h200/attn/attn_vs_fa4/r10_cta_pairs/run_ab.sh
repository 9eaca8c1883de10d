#!/usr/bin/env bash
# CTA-pair kernel: C++ GPU attention / Ulysses tests, sanitizer on the small shapes, A/B against the
# committed kernel (and the no-K/V-load tuning build).
set -uo pipefail
source bench/common/device_env.sh
export PYTHONUNBUFFERED=1
mkdir -p /tmp/gb /tmp/var && tar xJf .gpubin/gpubin.tar.xz -C /tmp/gb && tar xJf .gpubin-var/var.tar.xz -C /tmp/var
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv
(timeout 240 /tmp/gb/tests/xstage_gpu_tests --gtest_filter="${TESTS:-*Attn*:*Ulysses*}" --gtest_brief=1 2>&1; echo "exit $?") | tail -40 > $OUT/gpu_tests_1gpu.txt
tail -4 $OUT/gpu_tests_1gpu.txt
if [ -n "${SAN:-}" ]; then
for tool in memcheck racecheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 \
    /tmp/gb/tests/xstage_gpu_tests --gtest_filter="$SAN" --gtest_brief=1 2>&1 | tail -30
  echo "compute-sanitizer $tool exit ${PIPESTATUS[0]}"
done > $OUT/sanitizer.txt 2>&1
grep -E "exit|SUMMARY" $OUT/sanitizer.txt
fi
timeout ${ABT:-300} python3 bench/attn/attn_tune.py --json $OUT/ab.json --no-peers --check-rows 4 \
  --shapes ${SHAPES} ${VARIANTS} 2>&1 | grep -E "^seq|exit|Error|error" | tail -40
echo "ab exit ${PIPESTATUS[0]}"
