#!/usr/bin/env bash
# On the GPU machine, second of two calls (the first copied the carried wheels and FlashAttention-4's part a to
# /tmp while the machine stays warm): installs diffusers, xstage and FA4, runs the diffusers tests (GPU, CPU, bench
# smoke), then the Wan2.1-14B 720p end-to-end benchmark. Writes under $OUT: diffusers_tests.txt, wan_e2e.json,
# wan_e2e.png, wan_e2e.txt. Exit status: the tests' or the benchmark's, whichever failed.
#   WHEELS  folder holding the diffusers wheels (fetch_wheels.sh) and the xstage wheel   (default /tmp/difw)
#   FA4A    FA4 part a, copied by the first call                                          (default /tmp/fa4a)
#   FA4B    FA4 part b, carried, with fa4_device_install.sh beside it                     (default .fa4/b)
#   XSTAGE_GIT_REVISION  recorded in the benchmark's JSON (the device has no .git)
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/common/device_env.sh   # multicast off; NCCL / cuBLAS library paths
WHEELS=${WHEELS:-/tmp/difw} FA4A=${FA4A:-/tmp/fa4a} FA4B=${FA4B:-.fa4/b}
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  "$WHEELS"/*.whl || { echo "diffusers_device: wheels in $WHEELS did not install" >&2; exit 1; }
fa4_path=$(bash "$FA4B/fa4_device_install.sh" "$FA4A" "$FA4B") || { fa4_path=; echo "diffusers_device: FA4 not installed" >&2; }
export PYTHONPATH=/tmp/site${fa4_path:+:$fa4_path}
python3 -c 'import torch, diffusers, xstage; print("torch", torch.__version__, "diffusers", diffusers.__version__,
"xstage", xstage.__version__, xstage.build_info())'
timeout 300 python3 -m pytest -q -s -p no:cacheprovider tests/python/test_diffusers_gpu.py \
  tests/python/test_diffusers_cpu.py tests/python/test_diffusers_bench.py 2>&1 | tee "$OUT/diffusers_tests.txt"
tests=${PIPESTATUS[0]}
timeout 300 python3 bench/python/wan_e2e.py --out "$OUT/wan_e2e.json" --plot "$OUT/wan_e2e.png" \
  ${XSTAGE_GIT_REVISION:+--git-revision "$XSTAGE_GIT_REVISION"} 2>&1 | tee "$OUT/wan_e2e.txt"
bench=${PIPESTATUS[0]}
echo "diffusers_device: tests exit $tests, benchmark exit $bench"
[ "$tests" -eq 0 ] && [ "$bench" -eq 0 ]
