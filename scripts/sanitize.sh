#!/usr/bin/env bash
# Builds the CPU-only code with clang, AddressSanitizer and UndefinedBehaviorSanitizer into
# build-asan/ (only the CLI, the CPU tests and the loader fuzz harness), runs the CPU test suite under
# them, then the libFuzzer harness over every registered loader for XSTAGE_FUZZ_SECONDS (default 60)
# from the committed seed corpus (tests/fuzz/corpus). Longer on demand: XSTAGE_FUZZ_SECONDS=3600.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${XSTAGE_ASAN_BUILD_DIR:-$root/build-asan}
seconds=${XSTAGE_FUZZ_SECONDS:-60}
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
flags="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined -fsanitize=fuzzer-no-link"
if [ ! -f "$build/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DXSTAGE_ENABLE_CUDA=OFF \
    -DXSTAGE_BUILD_FUZZERS=ON "-DCMAKE_CXX_FLAGS=$flags" "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined" \
    "-DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=address,undefined" "${launcher[@]}"
fi
cmake --build "$build" -j "${XSTAGE_JOBS:-2}" --target xstage xstage_cpu_tests xstage_fuzz_loaders
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir "$build" -L cpu --output-on-failure -j "${XSTAGE_JOBS:-2}" --timeout 900
# The fuzzer writes new inputs into a scratch copy of the corpus, never into the committed one.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$root/tests/fuzz/corpus" "$work/corpus"
"$build/tests/xstage_fuzz_loaders" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$work/" -print_final_stats=1 "$work/corpus" 2>&1 | tail -n 20
echo "sanitize: CPU suite under ASan+UBSan passed; loader fuzzing ran ${seconds} s with no finding"
