#!/usr/bin/env bash
# On the GPU machine, in calls made back to back while it stays warm (bench/attn/peers_pack.sh lays out the carries;
# what one call leaves under /tmp/xstage_peers the next one uses):
#   stage   (carry .carry/peers1)  keeps FA4's part a, its wheels and the carried build, then runs the GPU tests
#           (gtest filter TESTS, default all) and, when SAN names a gtest filter, compute-sanitizer memcheck,
#           racecheck and synccheck over it (SAN_BUILD: a tuning build's name to sanitize its tests instead):
#           $OUT/gpu_tests.txt (gpu_tests_NAME.txt per tuning build), $OUT/sanitizer.txt
#   attn    (carry .carry/peers2)  installs FA4 and the carried wheels (the xstage wheel, peers that fit),
#           then our bf16 attention against FA4's Hopper forward and cuDNN SDPA in one process (attn_vs_cudnn.sh;
#           ATTN_BENCH_ARGS, default the d = 128 grid and d = 64, ours through the Python package), and when
#           ULYSSES_SEQS names lengths the fused epilogue's one-GPU cost: $OUT/attn_forward.json and .png
#   tune    (carry .carry/peers2)  as attn, then instead of its grid attn_tune.py over the carried builds (the
#           main build as `base`, each of peers_pack.sh's VARIANTS under its name; TUNE_SETS: one or more
#           semicolon-separated argument lists, e.g. "--shapes 16384x12 a:fp8 b:fp8; --shapes 16384x12x64 a b",
#           where a bare name stands for that build's xstage): $OUT/attn_tune_N.json
#   fp8     (carry .carry/peers3)  installs diffusers and the remaining peer wheels, then the 8-bit attention against cuDNN's FP8
#           SDPA and SageAttention 2 beside the bf16 kernels, speed and accuracy (attn_fp8.py; FP8_ARGS):
#           $OUT/attn_fp8.json and .png
#   python  (no carry)  the Python GPU tests ($OUT/python_gpu_tests.txt), FusedMoE against PyTorch
#           ($OUT/moe_vs_torch.json) and the Wan2.1-14B-shaped diffusers forward on every backend ($OUT/wan_e2e.*)
# GIT_REV: the revision recorded in the JSON (the GPU machine has no .git). BUDGET_S: wall seconds for the call.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${BUDGET_S:-570}
source bench/common/device_env.sh
dir=/tmp/xstage_peers
case "${1:-}" in
  stage | attn | tune | fp8 | python) ;;
  *) echo "usage: $0 {stage|attn|tune|fp8|python} (bench/attn/peers_pack.sh prepares the carries; see its header)" >&2
     exit 2 ;;
esac
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 XSTAGE_GIT_REVISION=${GIT_REV:-unknown}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv
# The Python path the earlier calls installed (attn: FA4 and the carried wheels; fp8: the rest).
[ -f "$dir/pythonpath" ] && export PYTHONPATH=$(cat "$dir/pythonpath")${PYTHONPATH:+:$PYTHONPATH}
install_wheels() {  # install_wheels FOLDER TARGET: every wheel of FOLDER into TARGET, added to the saved path
  ls "$1"/*.whl >/dev/null 2>&1 || return 0
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$2" "$1"/*.whl ||
    { echo "peers_device: wheels in $1 did not install" >&2; return 1; }
  echo "$2${PYTHONPATH:+:$PYTHONPATH}" > "$dir/pythonpath"
  export PYTHONPATH=$2${PYTHONPATH:+:$PYTHONPATH}
}
# gpu_tests BUILD_DIR OUT_FILE CAP_S: BUILD_DIR's GPU tests over the gtest filter TESTS; status 1 when they fail.
gpu_tests() {
  (timeout "$(left "$3")" "$1/tests/xstage_gpu_tests" --gtest_filter="${TESTS:-*}" --gtest_brief=1 2>&1
   echo "exit $?") | tail -80 > "$2"
  tail -4 "$2"
  grep -q "^exit 0$" "$2" || status=1
}
status=0
case "$1" in
  stage)
    rm -rf "$dir" && mkdir -p "$dir/gb" && cp .carry/peers1/* "$dir/" && tar xJf "$dir/gpubin.tar.xz" -C "$dir/gb" ||
      { echo "peers_device: .carry/peers1 is missing or incomplete (bench/attn/peers_pack.sh)" >&2; exit 1; }
    gpu_tests "$dir/gb" "$OUT/gpu_tests.txt" 300
    # Tuning builds (peers_pack.sh VARIANTS): each into $dir/NAME, its GPU tests over the same filter.
    for t in "$dir"/gpubin-*.tar.xz; do
      [ -f "$t" ] || continue
      name=$(basename "$t" .tar.xz); name=${name#gpubin-}
      mkdir -p "$dir/$name" && tar xJf "$t" -C "$dir/$name" || { echo "peers_device: $t did not unpack" >&2; exit 1; }
      echo "== $name"
      gpu_tests "$dir/$name" "$OUT/gpu_tests_$name.txt" 200
    done
    if [ -n "${SAN:-}" ]; then
      san_dir=$dir/${SAN_BUILD:-gb}  # SAN_BUILD: a VARIANTS name, to sanitize that build's tests instead
      [ -x "$san_dir/tests/xstage_gpu_tests" ] || { echo "peers_device: SAN_BUILD=${SAN_BUILD:-} has no GPU tests" >&2; exit 1; }
      sanitize_gpu_tests "$san_dir/tests/xstage_gpu_tests" "$SAN" 150 > "$OUT/sanitizer.txt" 2>&1 || status=1
      grep -E "exit|SUMMARY" "$OUT/sanitizer.txt"
    fi
    ;;
  attn | tune)
    [ -f "$dir/cu13part.aa" ] && [ -x "$dir/gb/xstage" ] ||
      { echo "peers_device: no $dir from a stage call: run 'stage' first, then 'attn' within 30 s" >&2; exit 1; }
    if [ -f "$dir/fa4_installed" ]; then
      echo "peers_device: FA4 and the wheels as an earlier attn or tune call installed them"
    else
      mkdir -p "$dir/b" && mv "$dir"/*.whl "$dir/b/" 2>/dev/null
      cp .carry/peers2/cu13part.ab "$dir/b/" || { echo "peers_device: carry .carry/peers2 with this call" >&2; exit 1; }
      fa4_path=$(bash .carry/peers2/fa4_device_install.sh "$dir" "$dir/b") ||
        { echo "peers_device: FA4 did not install" >&2; exit 1; }
      echo "$fa4_path" > "$dir/pythonpath"
      export PYTHONPATH=$fa4_path${PYTHONPATH:+:$PYTHONPATH}
      install_wheels .carry/peers2/wheels /tmp/site || exit 1
      touch "$dir/fa4_installed"
    fi
    python3 -c 'import xstage, flash_attn.cute; print("xstage", xstage.__version__, xstage.build_info())'
    if [ "$1" = tune ]; then
      i=0
      IFS=';' read -ra sets <<< "${TUNE_SETS:?TUNE_SETS names the attn_tune.py runs (see the header)}"
      for set in "${sets[@]}"; do
        i=$((i + 1))
        args=()
        for w in $set; do
          n=${w%%:*}
          if [ "$n" = base ] || [ -x "$dir/$n/xstage" ]; then
            b=$([ "$n" = base ] && echo "$dir/gb" || echo "$dir/$n")
            args+=("$n$([ "$w" != "${w#*:}" ] && echo "_${w#*:}")=$b/xstage${w#$n}")
          else
            args+=("$w")
          fi
        done
        echo "== attn_tune set $i: ${args[*]}"
        timeout "$(left 540)" python3 bench/attn/attn_tune.py --json "$OUT/attn_tune_$i.json" "${args[@]}" 2>&1 | tail -20
        [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "peers_device: attn_tune set $i failed" >&2; status=1; }
      done
      exit $status
    fi
    XSTAGE="$dir/gb/xstage" ATTN_BENCH_ARGS=${ATTN_BENCH_ARGS:---no-flash2 --ours-in-process} \
      timeout "$(left 480)" bash bench/attn/attn_vs_cudnn.sh "$OUT" 2>&1 | tail -40
    [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "peers_device: attn_vs_cudnn failed" >&2; status=1; }
    for m in ${ULYSSES_SEQS:-}; do
      timeout "$(left 90)" "$dir/gb/xstage" attn ulysses --gpus 0 --seq "$m" --heads 4 --variant fa-only,fa-only-tma \
        --passes 2 --iters 20 --out "$OUT/ulysses_1gpu_$m.json" 2>&1 | tail -6
      [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    done
    ;;
  fp8)
    [ -f "$dir/pythonpath" ] || { echo "peers_device: no $dir/pythonpath: run 'attn' first" >&2; exit 1; }
    install_wheels .carry/peers3/wheels /tmp/site3 || exit 1
    timeout "$(left 540)" python3 bench/attn/attn_fp8.py --json "$OUT/attn_fp8.json" --plot "$OUT/attn_fp8.png" \
      ${FP8_ARGS:-} 2>&1 | tail -40
    [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "peers_device: attn_fp8 failed" >&2; status=1; }
    ;;
  python)
    [ -f "$dir/pythonpath" ] || { echo "peers_device: no $dir/pythonpath: run 'attn' first" >&2; exit 1; }
    export XSTAGE_CLI=$dir/gb/xstage
    timeout "$(left 150)" python3 -m pytest -q -rs -p no:cacheprovider tests/python/test_moe_gpu.py \
      tests/python/test_attention_gpu.py tests/python/test_attention_fp8_gpu.py tests/python/test_diffusers_gpu.py \
      tests/python/test_moe_api.py 2>&1 | tail -30 | tee "$OUT/python_gpu_tests.txt"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    timeout "$(left 240)" python3 bench/python/moe_vs_torch.py --out "$OUT/moe_vs_torch.json" 2>&1 | tail -24
    [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "peers_device: moe_vs_torch failed" >&2; status=1; }
    timeout "$(left 240)" python3 bench/python/wan_e2e.py --out "$OUT/wan_e2e.json" --plot "$OUT/wan_e2e.png" \
      2>&1 | tail -16
    [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "peers_device: wan_e2e failed" >&2; status=1; }
    ;;
esac
exit $status
