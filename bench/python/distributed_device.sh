#!/usr/bin/env bash
# On the GPU machine: installs the carried wheels (xstage, diffusers, importlib_metadata) into /tmp/site, then runs
# the distributed layer's tests, each bounded by a timeout and teed under $OUT:
#   dist_pytest.txt        plain pytest (a one-process NCCL group made by the test): the distributed CPU and GPU tests
#                          and the diffusers integration tests (no regressions)
#   dist_torchrun_1.txt    torchrun --nproc_per_node 1 -m pytest tests/python/test_distributed_gpu.py
#   dist_torchrun_N.txt    the same with N = every GPU of the machine, where it has more than one
#   dist_cpp.txt           the C++ Ulysses GPU tests, when GPUBIN (an xz tar of build/tests/xstage_gpu_tests) is carried
#   WHEELS  folder of wheels (default .whl-dist)   GPUBIN (default $WHEELS/gpubin.tar.xz)
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/common/device_env.sh   # multicast off; NCCL (torch's) and cuBLAS library paths
WHEELS=${WHEELS:-.whl-dist} GPUBIN=${GPUBIN:-$WHEELS/gpubin.tar.xz}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  "$WHEELS"/*.whl || { echo "distributed_device: wheels in $WHEELS did not install" >&2; exit 1; }
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
status=0
note() { echo "distributed_device: $*"; }
python3 -c 'import torch, xstage; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version(), "xstage",
xstage.__version__, xstage.build_info(), "gpus", torch.cuda.device_count())' 2>&1 | tee "$OUT/dist_env.txt"

timeout 420 python3 -m pytest -q -rs -s -p no:cacheprovider tests/python/test_distributed_cpu.py \
  tests/python/test_distributed_gpu.py tests/python/test_diffusers_cpu.py tests/python/test_diffusers_gpu.py \
  2>&1 | tee "$OUT/dist_pytest.txt"
rc=${PIPESTATUS[0]}; note "pytest exit $rc"; [ "$rc" -eq 0 ] || status=1

ngpu=$(python3 -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
for n in 1 $([ "${ngpu:-0}" -gt 1 ] && echo "$ngpu"); do
  timeout 300 torchrun --standalone --nproc_per_node "$n" -m pytest -q -rs -s -p no:cacheprovider \
    tests/python/test_distributed_gpu.py 2>&1 | tee "$OUT/dist_torchrun_$n.txt"
  rc=${PIPESTATUS[0]}; note "torchrun x$n exit $rc"; [ "$rc" -eq 0 ] || status=1
done

if [ -f "$GPUBIN" ]; then
  mkdir -p /tmp/gb && tar xJf "$GPUBIN" -C /tmp/gb
  (timeout 300 /tmp/gb/tests/xstage_gpu_tests --gtest_filter='Ulysses*' --gtest_brief=1 2>&1; echo "exit $?") |
    tail -40 | tee "$OUT/dist_cpp.txt"
  grep -q "^exit 0$" "$OUT/dist_cpp.txt" || status=1
fi
exit $status
