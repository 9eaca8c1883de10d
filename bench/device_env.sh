# Sourced by the device scripts (bench/moe_device.sh, bench/moe_matrix.sh): the environment of a run on the
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
