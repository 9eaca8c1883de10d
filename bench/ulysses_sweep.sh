#!/usr/bin/env bash
# On the 2-GPU machine, from the repository root with build/ carried: the Ulysses GPU tests, then
# `xstage attn ulysses` at every sweep point (all variants, rotated order, JSON per point), then the
# PyTorch cuDNN SDPA + NCCL all_to_all_single baseline under torchrun, then the merged results
# (bench/ulysses_merge.py) and a short table last. Outputs under $OUT.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nccl_lib=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"lib"))' 2>/dev/null)
[ -n "$nccl_lib" ] && export LD_LIBRARY_PATH=$nccl_lib:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/xstage_out}
mkdir -p "$OUT/points"
log=$OUT/ulysses_log.txt
{ date -u +%FT%TZ; nvidia-smi -L; nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv; } > "$log" 2>&1
timeout 150 build/tests/xstage_gpu_tests --gtest_filter='Shapes/UlyssesTwoGpu.*' > "$OUT/ulysses_gpu_tests.txt" 2>&1
echo "gpu tests rc=$?" | tee -a "$log"
grep -E "^\[ +(OK|FAILED|PASSED|SKIPPED) " "$OUT/ulysses_gpu_tests.txt" | tail -8
# M:heads_per_gpu:text. HunyuanVideo (24 heads, SP=2 → 12): 720p x 33 frames = 32,400 image tokens + 256
# text tokens (joint, appended). Wan2.1-14B (40 heads → 20): 720p x 21 frames = 21,600 tokens.
POINTS=${POINTS:-"8192:4:0 16384:4:0 32768:4:0 49152:4:0 65536:4:0 32400:12:256 21600:20:0"}
for p in $POINTS; do
  IFS=: read m h t <<< "$p"
  timeout 120 build/xstage attn ulysses --gpus 0,1 --seq "$m" --text "$t" --heads "$h" --variant all \
    --warmup ${WARMUP:-3} --iters ${ITERS:-10} --passes ${PASSES:-2} --platform results/h200-x2/calibration/platform.json \
    --out "$OUT/points/ulysses_${m}_${h}_${t}.json" >> "$log" 2>&1
  echo "point $p rc=$?" | tee -a "$log"
done
torch_points=""
for p in $POINTS; do torch_points="$torch_points $p"; done
timeout 150 torchrun --nproc_per_node 2 bench/ulysses_torch.py --out "$OUT/points/torch.json" --points $torch_points >> "$log" 2>&1
echo "torch rc=$?" | tee -a "$log"
python3 bench/ulysses_merge.py "$OUT/points" "$OUT/ulysses.json" "$OUT/ulysses_table.md" >> "$log" 2>&1
echo "merge rc=$?" | tee -a "$log"
(cd "$OUT" && tar -czf points.tgz points && rm -rf points)
cat "$OUT/ulysses_table.md" 2>/dev/null
