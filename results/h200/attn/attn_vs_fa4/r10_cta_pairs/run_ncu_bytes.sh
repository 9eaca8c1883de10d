#!/usr/bin/env bash
# GPU attention / Ulysses tests of the working-tree build, then DRAM and L2 bytes of one launch per shape (ncu).
set -uo pipefail
source bench/common/device_env.sh
mkdir -p /tmp/gb && tar xJf .gpubin/gpubin.tar.xz -C /tmp/gb
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv
(timeout 200 /tmp/gb/tests/xstage_gpu_tests --gtest_filter='*Attn*:*Ulysses*' --gtest_brief=1 2>&1; echo "exit $?") | tail -30 > $OUT/gpu_tests_1gpu.txt
tail -4 $OUT/gpu_tests_1gpu.txt
M=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second
for sh in 16384x12 65536x5 75600x5 118800x3; do
  s=${sh%x*}; h=${sh#*x}
  echo "== $sh"
  timeout 120 ncu --clock-control none --cache-control none -k regex:attn_forward_kernel --launch-skip 2 --launch-count 1 \
    --metrics $M /tmp/gb/xstage attn bench --seq $s --heads $h --head-dim 128 --iters 1 --warmup 2 --check-rows 2 --tail whole 2>&1 | grep -E "dram__|lts__|gpu__time|sm__cycles|==PROF==|rror" | head -12
done > $OUT/ncu_dram.txt 2>&1
cat $OUT/ncu_dram.txt
