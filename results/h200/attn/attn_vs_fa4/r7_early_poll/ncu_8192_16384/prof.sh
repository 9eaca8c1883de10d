#!/bin/bash
# Nsight Compute at 16384 x 5 and 8192 x 5: ours (ebad94e) and FA4's Hopper forward, one launch each.
mkdir -p /tmp/gb && tar xJf .gpubin/gpubin.tar.xz -C /tmp/gb
X=/tmp/gb/xstage
S="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats"
for sh in 16384x5 8192x5; do s=${sh%x*}; h=${sh#*x}
  timeout 60 ncu --clock-control none -k regex:attn_forward_kernel --launch-skip 3 --launch-count 1 $S $X attn bench --seq $s --heads $h --head-dim 128 --iters 2 --warmup 3 --check-rows 2 > $OUT/ours_$sh.txt 2>&1
done
site=/tmp/fa4site
export PYTHONPATH=$site:$site/nvidia_cutlass_dsl/dsl_packages
cat > /tmp/fa4run.py <<'PY'
import sys, torch
from flash_attn.cute.interface import flash_attn_func
s, h = int(sys.argv[1]), int(sys.argv[2])
q, k, v = (torch.randn(1, s, h, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
for _ in range(6): flash_attn_func(q, k, v)
torch.cuda.synchronize()
PY
for sh in 16384x5 8192x5; do s=${sh%x*}; h=${sh#*x}
  timeout 90 ncu --clock-control none -k regex:"flash|Flash" --launch-skip 3 --launch-count 1 $S python3 /tmp/fa4run.py $s $h > $OUT/fa4_$sh.txt 2>&1
done
for f in $OUT/*.txt; do echo "== $f"; grep -E "Duration|Elapsed Cycles|SM Frequency|Compute \(SM\) Throughput|Grid Size|Registers Per|Waves Per SM|Achieved Occupancy|Issue Slots Busy|Warp Cycles Per Issued" $f | head -14; done
