#!/usr/bin/env bash
# Several versions of the attention kernel in one device call (carry .whl): A = the tree, and each other name in
# VARIANTS a folder .ab/<name>/ holding its versions of some files (same paths as in the tree). Builds each once,
# runs tests.sh against those in TESTED (SANITIZE=1 adds memcheck there), then times every version in turn, twice.
#   VARIANTS="A old slabs" TESTED="A slabs" BATCHES=1,16,64,128 KS=0,1,2,3 bash docs/gpu/attention_1130_thirtysixth/variants.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp/mtpserve-ab}
variants=${VARIANTS:-A old}
mkdir -p "$out" /tmp/A_src
STAGES=none bash scripts/gpu_check.sh > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
export PYTHONPATH=/tmp/site PATH=/usr/local/cuda/bin:$PATH CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)
so=$(python3 -c 'import mtpserve._C as c; print(c.__file__)')
cp "$so" /tmp/A.so
files=$(for v in $variants; do [ "$v" = A ] || (cd ".ab/$v" && find . -type f | sed 's|^\./||'); done | sort -u)
for f in $files; do mkdir -p "/tmp/A_src/$(dirname "$f")" && cp "$f" "/tmp/A_src/$f"; done
put() {  # put <version>: A's files, then the version's own
  for f in $files; do cp "/tmp/A_src/$f" "$f"; done
  [ "$1" = A ] || (cd ".ab/$1" && find . -type f | sed 's|^\./||' | while read -r f; do cp "$f" "../../$f"; done)
}
for v in $variants; do
  [ "$v" = A ] && continue
  put "$v"
  python3 -m pip install --no-build-isolation --no-deps -e . > "$out/rebuild_$v.log" 2>&1 || { tail -40 "$out/rebuild_$v.log"; exit 1; }
  cp "$so" "/tmp/$v.so"
done
for v in ${TESTED:-}; do
  put "$v"; cp "/tmp/$v.so" "$so"
  SANITIZE=${SANITIZE:-} bash docs/gpu/attention_1130_thirtysixth/tests.sh > "$out/test_$v.log" 2>&1
  echo "tests $v: $(grep -E 'passed|failed|ERROR SUMMARY' "$out/test_$v.log" | tr '\n' ' ')"
done
for round in 1 2; do
  for v in $variants; do
    put "$v"; cp "/tmp/$v.so" "$so"
    timeout 120 python3 scripts/bench_mla_attention.py --batches ${BATCHES:-16,64,128} --ks ${KS:-0,3} --reps 30 \
      --out "$out/${v}_$round" > "$out/bench_${v}_$round.txt" 2>&1
    echo "== $v $round"; grep -E "^\| 8192|copy bandwidth" "$out/bench_${v}_$round.txt"
  done
done
put A; cp /tmp/A.so "$so"; touch $files
rm -rf "$out"/*_[12]
