#!/usr/bin/env bash
# On the GPU machine, from the repository root with build/ carried from the development machine:
# the probe/comm/flag GPU tests, then `xstage calibrate` on every GPU present (two: rank 0 → rank 1;
# one: the local-target control sweep). Outputs under $OUT; a short table last.
#   QUICK=1 bench/calibration/calibrate_device.sh     (the --quick sweep)
#   GPUS=0,3 bench/calibration/calibrate_device.sh    (another pair; default 0,1 when two or more GPUs are present)
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# Device-API kernels need the NCCL library matching the headers (2.28.9): PyTorch's, first.
nccl_lib=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"lib"))' 2>/dev/null)
[ -n "$nccl_lib" ] && export LD_LIBRARY_PATH=$nccl_lib:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/xstage_out}
mkdir -p "$OUT"
ngpu=$(nvidia-smi -L | wc -l)
gpus=0; [ "$ngpu" -ge 2 ] && gpus=0,1
gpus=${GPUS:-$gpus}
dest=$OUT/calibration
{
  echo "== $(date -u +%FT%TZ) $ngpu GPU(s)"; nvidia-smi -L; nvidia-smi topo -m 2>/dev/null
  nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
} > "$OUT/device.txt" 2>&1
filter='FlagOrdering.*:BoundedWait*:Window.*:Comm.*:Verify.*:Provenance.*:Paths/LocalProbe.*:Gap.*:Probe.*:PathsAndPatterns/*'
timeout 240 build/tests/xstage_gpu_tests --gtest_filter="$filter" > "$OUT/gpu_tests.txt" 2>&1
echo "gpu tests rc=$?" >> "$OUT/device.txt"
timeout ${CAL_TIMEOUT:-600} build/xstage calibrate --gpus $gpus --out "$dest" ${QUICK:+--quick} ${CAL_ARGS:-} 2> "$OUT/calibrate.log"
echo "calibrate rc=$?" >> "$OUT/device.txt"
if [ "$ngpu" -ge 2 ] && [ -z "${NO_LOCAL_RUN:-}" ]; then
  # The one-GPU mode too (local control only), packed into one file (the transfer takes 8 files).
  timeout 120 build/xstage calibrate --gpus 0 --quick --out "$OUT/one_gpu" 2> "$OUT/one_gpu.log"
  echo "one-gpu calibrate rc=$?" >> "$OUT/device.txt"
  mv "$OUT/one_gpu.log" "$OUT/one_gpu/" && tar -C "$OUT" -czf "$OUT/one_gpu.tgz" one_gpu && rm -rf "$OUT/one_gpu"
fi
tr '\r' '\n' < "$OUT/calibrate.log" >> "$OUT/device.txt" && rm "$OUT/calibrate.log"
grep -E "^\[  (PASSED|FAILED|  SKIPPED) |tests? (ran|skipped)|^\[  FAILED" "$OUT/gpu_tests.txt" | tail -25
grep -E "rc=|check|R =|points in" "$OUT/device.txt" | tail -n 14
