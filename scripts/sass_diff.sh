#!/usr/bin/env bash
# Compares the SASS of the CUDA objects of two build folders, function by function:
#   scripts/sass_diff.sh BUILD_A BUILD_B [OUT_DIR]
# Every src/*/CMakeFiles/*/*.cu.o present in BUILD_A is disassembled in both builds (cuobjdump -sass),
# with instruction addresses, encodings and comments removed and anonymous-namespace hashes (which
# depend on the file's path and contents, not on its code) replaced by one token. Prints one line
# per object (IDENTICAL / DIFFERENT / MISSING) and, for a different object, each differing function
# with its instruction counts in A and B. The normalised listings are left in OUT_DIR (default: a
# temporary folder) for `diff`. Exit status: 0 all identical, 1 some object differs or is missing,
# 2 bad arguments or no disassembler.
# cuobjdump (and the nvdisasm it runs) from $CUOBJDUMP, PATH or /usr/local/cuda/bin. A toolkit without
# them: the PyPI wheels nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm carry both (nvidia/cu13/bin/).
# Identical SASS needs identical PTX: `cuobjdump -ptx` of both objects shows where a change starts.
set -euo pipefail
if [ $# -lt 2 ] || [ $# -gt 3 ]; then
  echo "usage: $0 BUILD_A BUILD_B [OUT_DIR]" >&2
  exit 2
fi
a=$1
b=$2
for d in "$a" "$b"; do
  if [ ! -d "$d/src" ]; then
    echo "sass_diff: build folder '$d' has no src/ (not a configured xstage build)" >&2
    exit 2
  fi
done
out=${3:-$(mktemp -d)}
mkdir -p "$out"
cuobjdump=${CUOBJDUMP:-$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)}
if [ ! -x "$cuobjdump" ]; then
  echo "sass_diff: no cuobjdump (set CUOBJDUMP=/path/to/cuobjdump; nvdisasm must sit beside it or on PATH)" >&2
  exit 2
fi
PATH=$(dirname "$cuobjdump"):$PATH

# One normalised listing: "Function : NAME" headers and instruction text only.
normalise() {
  "$cuobjdump" -sass "$1" |
    sed -E -e 's@/\*[^*]*\*/@@g' \
      -e 's/[0-9]+_GLOBAL__N__[0-9a-f]+_[0-9]+_[A-Za-z0-9_]+_[0-9a-f]{8}/ANON/g' \
      -e 's/[[:space:]]+/ /g' -e 's/^ //; s/ $//' |
    grep -E '^(Function :|[A-Z@])' | grep -vE '^(Fatbin|EF_CUDA)' || true
}

# Splits a listing into one block per function and prints "NAME COUNT HASH" lines.
summarise() {
  python3 - "$1" <<'EOF'
import hashlib, sys
funcs, name = {}, None
for line in open(sys.argv[1]):
    if line.startswith("Function :"):
        name = line.split(":", 1)[1].strip()
        funcs.setdefault(name, [])
    elif name is not None:
        funcs[name].append(line)
for f in sorted(funcs):
    body = "".join(funcs[f])
    print(f, len(funcs[f]), hashlib.md5(body.encode()).hexdigest())
EOF
}

status=0
identical=0
total=0
while IFS= read -r obj; do
  rel=${obj#"$a"/}
  total=$((total + 1))
  tag=$(echo "$rel" | tr '/' '_')
  if [ ! -f "$b/$rel" ]; then
    echo "MISSING    $rel (not in $b)"
    status=1
    continue
  fi
  normalise "$a/$rel" >"$out/$tag.A.sass"
  normalise "$b/$rel" >"$out/$tag.B.sass"
  if cmp -s "$out/$tag.A.sass" "$out/$tag.B.sass"; then
    echo "IDENTICAL  $rel ($(grep -c '^Function :' "$out/$tag.A.sass") functions)"
    identical=$((identical + 1))
    continue
  fi
  status=1
  echo "DIFFERENT  $rel"
  summarise "$out/$tag.A.sass" >"$out/$tag.A.sum"
  summarise "$out/$tag.B.sass" >"$out/$tag.B.sum"
  # Functions whose body differs (or exist on one side only): name, instructions in A -> B.
  join -a1 -a2 -e '-' -o 0,1.2,1.3,2.2,2.3 <(sort "$out/$tag.A.sum") <(sort "$out/$tag.B.sum") |
    awk '$3 != $5 { printf "    %s: %s -> %s instructions\n", $1, $2, $4 }'
done < <(cd "$a" && find src -path '*/CMakeFiles/*' -name '*.cu.o' | sort | sed "s@^@$a/@")
echo "sass_diff: $identical of $total objects identical (listings in $out)"
exit $status
