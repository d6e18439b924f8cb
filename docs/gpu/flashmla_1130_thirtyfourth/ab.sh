#!/usr/bin/env bash
# Two of FlashMLA's techniques in our kernel, in one device call (carry .whl), each variant's files under
# .ab/<variant>/ (same paths as in the tree): A = the tree; evict = the KV tiles' bulk copies under an L2
# evict-first policy; slabs = that plus a barrier per 64-column slab, so that S = Q K^T starts on a tile's first
# slab instead of its last; *_nofence = without the proxy fence after a bulk copy's barrier (bulk copies and
# wgmma both go through the async proxy). Builds every variant once, runs the attention tests on those in TESTED
# (and memcheck on those in SANITIZED), then times them round-robin, twice.
#   VARIANTS="A evict slabs" TESTED=slabs bash docs/gpu/flashmla_1130_thirtyfourth/ab.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp/mtpserve-ab}
variants=${VARIANTS:-A evict slabs}
mkdir -p "$out"
STAGES=none bash scripts/gpu_check.sh > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
export PYTHONPATH=/tmp/site PATH=/usr/local/cuda/bin:$PATH CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)
so=$(python3 -c 'import mtpserve._C as c; print(c.__file__)')
cp "$so" /tmp/A.so
files="cpp/kernels/cuda/async_copy.cuh cpp/kernels/cuda/mla_attention_wgmma.cu"
mkdir -p /tmp/A_src && for f in $files; do cp "$f" /tmp/A_src/; done
for v in $variants; do
  [ "$v" = A ] && continue
  for f in $files; do cp ".ab/$v/$f" "$f"; done
  python3 -m pip install --no-build-isolation --no-deps -e . > "$out/rebuild_$v.log" 2>&1 || { tail -40 "$out/rebuild_$v.log"; exit 1; }
  cp "$so" "/tmp/$v.so"
done
for f in $files; do cp "/tmp/A_src/$(basename $f)" "$f"; touch "$f"; done
for v in ${TESTED:-}; do
  cp "/tmp/$v.so" "$so"
  timeout 150 python3 -m pytest -q -p no:cacheprovider -x tests/test_cuda_attention.py > "$out/test_$v.log" 2>&1
  echo "tests $v: $(tail -1 "$out/test_$v.log")"
done
for v in ${SANITIZED:-}; do
  cp "/tmp/$v.so" "$so"
  timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m pytest -q -p no:cacheprovider -x \
    tests/test_cuda_attention.py -k "not long" > "$out/memcheck_$v.log" 2>&1
  echo "memcheck $v (exit $?): $(grep -E 'ERROR SUMMARY|passed|failed' "$out/memcheck_$v.log" | tail -2 | tr '\n' ' ')"
done
for round in 1 2; do
  for v in $variants; do
    cp "/tmp/$v.so" "$so"
    timeout 120 python3 scripts/bench_mla_attention.py --batches ${BATCHES:-16,64,128} --ks ${KS:-0,3} --reps 30 \
      --out "$out/${v}_$round" > "$out/bench_${v}_$round.txt" 2>&1
    echo "== $v $round"; grep -E "^\| 8192" "$out/bench_${v}_$round.txt"
  done
done
cp /tmp/A.so "$so"
rm -rf "$out"/*_[12]
