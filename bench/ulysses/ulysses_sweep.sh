#!/usr/bin/env bash
# On the 2-GPU machine, from the repository root with build/ carried: the Ulysses GPU tests, then
# `xstage attn ulysses` at every sweep point (all variants, rotated order, JSON per point; FP8_POINTS also at
# --precision fp8), then the PyTorch cuDNN SDPA + NCCL all_to_all_single baseline under torchrun, then the
# merged results (bench/ulysses/ulysses_merge.py) and a short table last. Outputs under $OUT.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nccl_lib=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"lib"))' 2>/dev/null)
[ -n "$nccl_lib" ] && export LD_LIBRARY_PATH=$nccl_lib:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/xstage_out}
BUILD=${BUILD:-build}  # folder holding xstage and tests/xstage_gpu_tests
GPUS=${GPUS:-0,1}      # the team (GPUS=0 runs the whole script on one GPU, every row local: a dry run)
ngpu=$(tr ',' '\n' <<< "$GPUS" | wc -l)
mkdir -p "$OUT/points"
log=$OUT/ulysses_log.txt
{ date -u +%FT%TZ; nvidia-smi -L; nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv; } > "$log" 2>&1
timeout 300 "$BUILD"/tests/xstage_gpu_tests --gtest_filter='Shapes/UlyssesTwoGpu.*:UlyssesOneGpu.*:UlyssesApi*' > "$OUT/ulysses_gpu_tests.txt" 2>&1
echo "gpu tests rc=$?" | tee -a "$log"
grep -E "^\[ +(OK|FAILED|PASSED|SKIPPED) " "$OUT/ulysses_gpu_tests.txt" | tail -12
# M:heads_per_gpu:text. HunyuanVideo (24 heads, SP=2 → 12): 720p x 33 frames = 32,400 image tokens + 256
# text tokens (joint, appended). Wan2.1-14B (40 heads → 20): 720p x 21 frames = 21,600 tokens.
POINTS=${POINTS:-"8192:4:0 16384:4:0 32768:4:0 49152:4:0 65536:4:0 32400:12:256 21600:20:0"}
# The same layer with the natural query order (own rows not last), at a few points, for comparison.
# (Each list may be set empty to skip it.)
NATURAL_POINTS=${NATURAL_POINTS-"16384:4:0 65536:4:0"}
# The remote-first tile order (every head's tiles holding the other rank's rows before any own-row tile):
# where the own-last order still ends with remote tiles (few waves), the last wave then stores locally.
REMOTE_FIRST_POINTS=${REMOTE_FIRST_POINTS-"$POINTS"}
run_point() {  # M H T ORDER [--graph | "--precision fp8"]
  local tag=""
  case "${5:-}" in --graph) tag=_graph ;; "--precision fp8") tag=_fp8 ;; esac
  timeout 150 "$BUILD"/xstage attn ulysses --gpus "$GPUS" --seq "$1" --text "$3" --heads "$2" --variant all --tile-order "$4" ${5:-} \
    --warmup ${WARMUP:-2} --iters ${ITERS:-20} --passes ${PASSES:-2} --platform results/h200-x2/calibration/platform.json \
    --out "$OUT/points/ulysses_${1}_${2}_${3}_${4}${tag}.json" >> "$log" 2>&1
  echo "point $1:$2:$3 $4 ${5:-} rc=$?" | tee -a "$log"
}
for p in $POINTS; do IFS=: read m h t <<< "$p"; run_point "$m" "$h" "$t" own-last; done
for p in $REMOTE_FIRST_POINTS; do IFS=: read m h t <<< "$p"; run_point "$m" "$h" "$t" remote-first; done
for p in $NATURAL_POINTS; do IFS=: read m h t <<< "$p"; run_point "$m" "$h" "$t" natural; done
# The paper's replay method: each pass captured into one CUDA graph per GPU (--graph), beside the
# stream-launched points above.
for p in ${GRAPH_POINTS-"8192:4:0 16384:4:0 65536:4:0"}; do IFS=: read m h t <<< "$p"; run_point "$m" "$h" "$t" own-last --graph; done
# Every variant on FP8 attention (--precision fp8: the quantization pre-pass inside each iteration).
for p in ${FP8_POINTS-"16384:4:0 65536:4:0 32400:12:256"}; do
  IFS=: read m h t <<< "$p"; run_point "$m" "$h" "$t" own-last "--precision fp8"
done
# One GPU (every row local): the fused kernels' own cost without remote traffic.
for m in ${ONE_GPU_POINTS-32768 65536}; do
  timeout 90 "$BUILD"/xstage attn ulysses --gpus 0 --seq "$m" --heads 4 --variant fa-only,fa-only-tma,serial-ours,fused-tma,coupled-tma \
    --warmup 2 --iters ${ITERS:-20} --passes ${PASSES:-2} --out "$OUT/points/one_gpu_${m}_4.json" >> "$log" 2>&1
  echo "one-gpu point $m rc=$?" | tee -a "$log"
done
# SASS of the fused kernels (HGMMA count, MEMBAR, local memory), where the toolkit has cuobjdump.
if command -v cuobjdump > /dev/null; then
  cuobjdump --dump-sass "$BUILD"/xstage 2>/dev/null | awk '/Function :/{f=$3} /HGMMA/{h[f]++} /MEMBAR/{m[f]++} /LDL|STL/{l[f]++} /UBLKCP/{b[f]++} /BAR\.(SYNC|ARV)/{n[f]++} END{for(k in h) if (k ~ /attn_forward_kernel/) print k, "HGMMA", h[k], "MEMBAR", m[k]+0, "LDL/STL", l[k]+0, "UBLKCP", b[k]+0, "BAR", n[k]+0}' > "$OUT/ulysses_sass.txt"
fi
torch_points=""
for p in $POINTS; do torch_points="$torch_points $p"; done
timeout 150 torchrun --nproc_per_node "$ngpu" bench/ulysses/ulysses_torch.py --iters ${ITERS:-20} --out "$OUT/points/torch.json" --points $torch_points >> "$log" 2>&1
echo "torch rc=$?" | tee -a "$log"
python3 bench/ulysses/ulysses_merge.py "$OUT/points" "$OUT/ulysses.json" "$OUT/ulysses_table.md" >> "$log" 2>&1
echo "merge rc=$?" | tee -a "$log"
(cd "$OUT" && tar -czf points.tgz points && rm -rf points)
cat "$OUT/ulysses_table.md" 2>/dev/null
