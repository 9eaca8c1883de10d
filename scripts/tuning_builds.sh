#!/usr/bin/env bash
# Compiles every tuning variant of the attention kernels (xstage/sched/attn_tuning.hpp): two extra build folders
# that together set each knob to a value other than its default, in each only the attention and Ulysses CUDA
# objects. Fails on the first compile error. Run by scripts/test.sh after the main build; alone:
#   scripts/tuning_builds.sh            folders ${XSTAGE_BUILD_DIR:-build}-tuning-{a,b} (ccache shares objects)
# Without nvcc there is nothing to compile: it says so and succeeds.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${XSTAGE_BUILD_DIR:-$root/build}
export PATH=$PATH:/usr/local/cuda/bin
if ! command -v nvcc >/dev/null; then
  echo "tuning_builds: no nvcc, no CUDA objects to compile"
  exit 0
fi
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi

# Folder name, then its knobs. Every value other than the default, combined where the knobs are independent:
#   a: three consumer warpgroups at d = 64 and in FP8 (FP8 with 64-key blocks, a 64-byte V^T swizzle: 0 spills),
#      bf16 GEMM turns off, Q from shared memory at d = 128, CTA pairs; FP8 exponentials all on MUFU.
#   b: bf16 64-key blocks, Q in registers at d = 64; FP8 96-key blocks (a 32-byte V^T swizzle), every FP8
#      exponential on the FMA pipe.
variants=(
  "a -DXSTAGE_ATTN_TUNE_WARPGROUPS_D64=2 -DXSTAGE_ATTN_FP8_TUNE_WARPGROUPS=2
     -DXSTAGE_ATTN_TUNE_WG_ORDER=0 -DXSTAGE_ATTN_TUNE_Q_IN_REGS=0 -DXSTAGE_ATTN_TUNE_CLUSTER_M=2
     -DXSTAGE_ATTN_FP8_TUNE_EXP_EMU=0"
  "b -DXSTAGE_ATTN_TUNE_BLOCK_N=64 -DXSTAGE_ATTN_TUNE_Q_IN_REGS=1 -DXSTAGE_ATTN_FP8_TUNE_BLOCK_N=64
     -DXSTAGE_ATTN_FP8_TUNE_EXP_EMU=8"
)
# The attention and Ulysses CUDA objects (src/ulysses only where the communication library is built).
objects=(
  src/attn/CMakeFiles/xstage_attn.dir/attn_forward.cu.o
  src/attn/CMakeFiles/xstage_attn.dir/attn_fp8_forward.cu.o
  src/attn/CMakeFiles/xstage_attn.dir/attn_fp8_quant.cu.o
  src/ulysses/CMakeFiles/xstage_ulysses.dir/ulysses_attn.cu.o
  src/ulysses/CMakeFiles/xstage_ulysses.dir/ulysses_attn_fp8.cu.o
  src/ulysses/CMakeFiles/xstage_ulysses.dir/ulysses_kernels.cu.o
)

for v in "${variants[@]}"; do
  IFS=$' \n' read -r -d '' -a words <<<"$v" || true
  name=${words[0]}
  knobs=("${words[@]:1}")
  dir=$build-tuning-$name
  echo "tuning_builds: $name: ${knobs[*]}"
  # Every knob given on each configure, so that a folder configured before keeps no stale value.
  mkdir -p "$dir"
  cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DXSTAGE_BUILD_TESTS=OFF "${launcher[@]}" \
    "-UXSTAGE_ATTN_*TUNE*" "${knobs[@]}" >"$dir/tuning_configure.log" 2>&1 || {
    cat "$dir/tuning_configure.log" >&2
    echo "tuning_builds: $name: configure failed" >&2
    exit 1
  }
  present=$(ninja -C "$dir" -t targets all | cut -d: -f1)
  targets=()
  for o in "${objects[@]}"; do
    if grep -qxF "$o" <<<"$present"; then targets+=("$o"); else echo "tuning_builds: $name: no $o here"; fi
  done
  if [ ${#targets[@]} -eq 0 ]; then
    echo "tuning_builds: $name: no attention objects in this configuration" >&2
    exit 1
  fi
  ninja -C "$dir" -j "${XSTAGE_JOBS:-2}" "${targets[@]}"
done
echo "tuning_builds: ${#variants[@]} folders, every attention tuning variant compiled"
