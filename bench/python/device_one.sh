#!/usr/bin/env bash
# On a one-GPU machine, in one call, without FA4 (whose parts need calls of their own: bench/attn/peers_device.sh):
# installs the carried wheels of CARRY (default .carry/one: the xstage wheel, diffusers, importlib_metadata and,
# for the 8-bit comparison, nvidia-cudnn-frontend) into /tmp/site and the binaries of CARRY/gpubin.tar.xz (an xz
# tar of build/xstage and build/tests/xstage_gpu_tests), then runs the STEPS named (default all), each bounded by
# what is left of BUDGET_S, with results under $OUT:
#   wheel   the installed console script and package: $OUT/wheel.txt (xstage --version, xstage plan, python -m xstage)
#   cpp     the C++ GPU tests: $OUT/gpu_tests.txt; compute-sanitizer over SAN (a gtest filter) when set: sanitizer.txt
#   pytest  the Python GPU tests (attention bf16 and 8-bit, FusedMoE, diffusers and the SDPA route): python_gpu_tests.txt
#   wan     the Wan2.1-14B-shaped diffusers forward on WAN_IMPLS (default xstage,xstage_sdpa,cudnn,xstage_fp8): wan_e2e.*
#   moe     FusedMoE (schedule auto) against PyTorch: moe_vs_torch.json
#   fp8     the 8-bit attention against cuDNN's FP8 SDPA beside the bf16 kernels (FP8_ARGS): attn_fp8.json and .png
# XSTAGE_GIT_REVISION (environment): the revision recorded in the benchmarks' JSON (the GPU machine has no .git).
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${BUDGET_S:-570}
source bench/common/device_env.sh
CARRY=${CARRY:-.carry/one} STEPS=${STEPS:-wheel,cpp,pytest,wan,moe,fp8}
case ",$STEPS," in *",wheel,"* | *",cpp,"* | *",pytest,"* | *",wan,"* | *",moe,"* | *",fp8,"*) ;;
  *) echo "device_one: STEPS '$STEPS' names none of wheel,cpp,pytest,wan,moe,fp8" >&2; exit 2 ;; esac
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  "$CARRY"/*.whl || { echo "device_one: wheels in $CARRY did not install" >&2; exit 1; }
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
mkdir -p /tmp/gb && tar xJf "$CARRY/gpubin.tar.xz" -C /tmp/gb || { echo "device_one: no $CARRY/gpubin.tar.xz" >&2; exit 1; }
export XSTAGE_CLI=/tmp/gb/xstage
status=0
step() { [[ ",$STEPS," == *",$1,"* ]]; }
note() { echo "device_one: $*"; }
if step wheel; then
  { /tmp/site/bin/xstage --version && /tmp/site/bin/xstage plan --help | head -3 && python3 -m xstage --version &&
    python3 -c 'import xstage; print(xstage.__file__, xstage.build_info())'; } > "$OUT/wheel.txt" 2>&1
  rc=$?; cat "$OUT/wheel.txt"; note "wheel exit $rc"; [ "$rc" -eq 0 ] || status=1
fi
if step cpp; then
  (timeout "$(left 240)" /tmp/gb/tests/xstage_gpu_tests --gtest_brief=1 2>&1; echo "exit $?") | tail -60 > "$OUT/gpu_tests.txt"
  tail -4 "$OUT/gpu_tests.txt"; grep -q "^exit 0$" "$OUT/gpu_tests.txt" || status=1
  if [ -n "${SAN:-}" ]; then
    sanitize_gpu_tests /tmp/gb/tests/xstage_gpu_tests "$SAN" 120 > "$OUT/sanitizer.txt" 2>&1 || status=1
    grep -E "exit|SUMMARY" "$OUT/sanitizer.txt"
  fi
fi
if step pytest; then
  timeout "$(left 200)" python3 -m pytest -q -rs -p no:cacheprovider tests/python/test_attention_gpu.py \
    tests/python/test_attention_fp8_gpu.py tests/python/test_moe_gpu.py tests/python/test_diffusers_gpu.py \
    tests/python/test_moe_api.py 2>&1 | tail -40 | tee "$OUT/python_gpu_tests.txt"
  rc=${PIPESTATUS[0]}; note "pytest exit $rc"; [ "$rc" -eq 0 ] || status=1
fi
if step wan; then
  timeout "$(left 240)" python3 bench/python/wan_e2e.py --impls "${WAN_IMPLS:-xstage,xstage_sdpa,cudnn,xstage_fp8}" \
    --out "$OUT/wan_e2e.json" --plot "$OUT/wan_e2e.png" 2>&1 | tail -16
  rc=${PIPESTATUS[0]}; note "wan_e2e exit $rc"; [ "$rc" -eq 0 ] || status=1
fi
if step moe; then
  timeout "$(left 300)" python3 bench/python/moe_vs_torch.py --out "$OUT/moe_vs_torch.json" 2>&1 | tail -24
  rc=${PIPESTATUS[0]}; note "moe_vs_torch exit $rc"; [ "$rc" -eq 0 ] || status=1
fi
if step fp8; then
  timeout "$(left 540)" python3 bench/attn/attn_fp8.py --json "$OUT/attn_fp8.json" --plot "$OUT/attn_fp8.png" \
    ${FP8_ARGS:-} 2>&1 | tail -40
  rc=${PIPESTATUS[0]}; note "attn_fp8 exit $rc"; [ "$rc" -eq 0 ] || status=1
fi
exit $status
