#!/bin/bash
# Nsight Compute, one launch each, per-instruction warp-state samples; run from the repository root on the GPU
# machine, with .gpubin/gpubin.tar.xz holding the build's xstage binary and $OUT the output folder.
mkdir -p /tmp/gb && tar xJf .gpubin/gpubin.tar.xz -C /tmp/gb
X=/tmp/gb/xstage
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv
which ncu; ncu --version | tail -1
S="--section SpeedOfLight --section ComputeWorkloadAnalysis --section SchedulerStats --section WarpStateStats --section SourceCounters --section InstructionStats --section MemoryWorkloadAnalysis_Tables --section LaunchStats"
timeout 200 ncu --clock-control none -k regex:attn_forward_kernel --launch-skip 3 --launch-count 1 $S -o $OUT/bf16 -f $X attn bench --seq 65536 --heads 5 --head-dim 128 --iters 2 --warmup 3 --check-rows 2 > $OUT/bf16_run.txt 2>&1
timeout 200 ncu --clock-control none -k regex:attn_forward_kernel --launch-skip 3 --launch-count 1 $S -o $OUT/fp8 -f $X attn bench --seq 32768 --heads 12 --head-dim 128 --iters 2 --warmup 3 --check-rows 2 --precision fp8 > $OUT/fp8_run.txt 2>&1
for r in bf16 fp8; do
  ncu -i $OUT/$r.ncu-rep --page details > $OUT/${r}_details.txt 2>&1
  ncu -i $OUT/$r.ncu-rep --page source --csv --print-source sass > $OUT/${r}_sass.csv 2>&1
done
ls -la $OUT
cd $OUT && tar cJf prof.tar.xz *_details.txt *_sass.csv *_run.txt && rm -f *_sass.csv *_details.txt
ls -la $OUT
