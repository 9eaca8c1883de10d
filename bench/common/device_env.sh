# Sourced by the device scripts (bench/moe/moe_device.sh, bench/moe/moe_matrix.sh, bench/moe/moe_ab.sh,
# bench/moe/moe_gemm_alone.sh): the environment of a run on the
# GPU machine. NVLink SHARP / multicast off; the NCCL library matching the headers (2.28.9): PyTorch's, first
# on the library path; cuBLAS 13: the toolkit's, else the wheel's (no empty path entry: it would mean the
# current folder). BUILD (build folder carried from the development machine) and OUT (results) keep a
# caller's values.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
BUILD=${BUILD:-build}
OUT=${OUT:-/tmp/xstage_out}
nccl_lib=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"lib"))' 2>/dev/null)
[ -n "$nccl_lib" ] && export LD_LIBRARY_PATH=$nccl_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
wheel_libs=$(python3 -c 'import nvidia, os
p = list(nvidia.__path__)[0]
print(os.path.join(p, "cu13", "lib"), os.path.join(p, "cublas", "lib"))' 2>/dev/null)
for d in /usr/local/cuda/lib64 $wheel_libs; do
  [ -d "$d" ] && export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d
done
unset nccl_lib wheel_libs d
# The MoE baseline loads cuBLAS on first use (dlopen of libcublas.so.13, src/testing/cublas_loader.hpp), so ldd of
# the CLI does not show it: the copy the loader finds first on LD_LIBRARY_PATH, else the system's (ldconfig).
cublas_lib() {
  local d
  for d in ${LD_LIBRARY_PATH//:/ }; do
    [ -e "$d/libcublas.so.13" ] && { echo "cuBLAS (loaded on first use): $d/libcublas.so.13"; return; }
  done
  echo "cuBLAS (loaded on first use): $(ldconfig -p 2>/dev/null | grep -m1 -o '/[^ ]*libcublas\.so\.13$' || echo 'libcublas.so.13 not found')"
}
# Every built-in MoE shape (model/workloads.cpp), the default of the scripts that sweep them all.
MOE_BUILTIN_SHAPES="deepseek-v4-flash deepseek-v4-pro deepseek-v3 qwen3-235b-a22b glm-4.5 mimo-v2-flash dit-moe-g2-16e2a"
# Budgeted scripts (BUDGET_S wall seconds in all): `left N` is the timeout for the next step, at most N,
# at most what is left of the budget since the script sourced this file less 10 s for its merge, at least 1.
budget_start=$(date +%s)
left() {
  local l=$((BUDGET_S - ($(date +%s) - budget_start) - 10))
  [ $l -lt 1 ] && l=1
  [ $l -gt $1 ] && l=$1
  echo $l
}
# compute-sanitizer's memcheck, racecheck and synccheck over the GPU tests that gtest FILTER selects in BIN, each
# bounded by CAP seconds (by `left CAP` in budgeted scripts). API errors are not reported: NCCL's start-up probes
# raise cudaErrorNoKernelImageForDevice. Prints each tool's last lines and "compute-sanitizer TOOL exit RC";
# returns 1 when any tool failed.
sanitize_gpu_tests() {
  local bin=$1 filter=$2 cap=$3 tool rc t status=0
  for tool in memcheck racecheck synccheck; do
    t=$cap; [ -n "${BUDGET_S:-}" ] && t=$(left "$cap")
    timeout "$t" compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 \
      "$bin" --gtest_filter="$filter" --gtest_brief=1 2>&1 | tail -40
    rc=${PIPESTATUS[0]}; echo "compute-sanitizer $tool exit $rc"; [ "$rc" -eq 0 ] || status=1
  done
  return $status
}
