#!/usr/bin/env bash
# Call 1 of 2: FA4 part a to /tmp; C++ attention / Ulysses GPU tests; compute-sanitizer on the touched paths.
set -uo pipefail
source bench/common/device_env.sh
mkdir -p /tmp/fa4a && cp .fa4/a/* /tmp/fa4a/
mkdir -p /tmp/gb && tar xJf .gpubin/gpubin.tar.xz -C /tmp/gb
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv
(timeout 120 /tmp/gb/tests/xstage_gpu_tests --gtest_filter='*Attn*:*Ulysses*' --gtest_brief=1 2>&1; echo "exit $?") | tail -30 > $OUT/gpu_tests_1gpu.txt
tail -4 $OUT/gpu_tests_1gpu.txt
F='Shapes/AttnForwardSmall.*:AttnForward.PersistentGridManyTilesSampled:UlyssesOneGpu.TwoPhaseTileScheduleKeepsEveryBit:Shapes/AttnForwardSplitTail.MatchesReferenceAndWholeTiles/b2_sq4096*'
for tool in memcheck racecheck synccheck; do
  timeout 100 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 \
    /tmp/gb/tests/xstage_gpu_tests --gtest_filter="$F" --gtest_brief=1 2>&1 | tail -12
  echo "compute-sanitizer $tool exit ${PIPESTATUS[0]}"
done > $OUT/sanitizer.txt 2>&1
grep -E "exit|SUMMARY|ms total" $OUT/sanitizer.txt
ls /tmp/fa4a
