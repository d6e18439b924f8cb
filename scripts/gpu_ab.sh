#!/usr/bin/env bash
# A/B of two versions of some source files on one GPU machine, in one device call (device tool; carry .whl
# and the variant folder). Builds the tree as it is (A) and, with every file under $AB_VARIANT swapped in (same
# relative paths), version B: each once, keeping each build's extension. Then runs $AB_CMD in the order A B A B,
# each run with its version's files and extension in place, so that drift of the machine shows as a difference
# between the two runs of one version and no rebuild spends device time between them. Each run's output goes to
# its own folder (the command sees it as $RUN_OUT), all four archived at the end as $OUT/runs.tgz (the device tool
# returns only so many files). The tree ends as A with A's extension, its swapped files newer than the build's, so
# that the machine's next build (it keeps build folders between calls) compiles them again.
#   AB_VARIANT=.ab/new AB_CMD='python3 scripts/bench_mla_attention.py --batches 16,64 --out $RUN_OUT' \
#     bash scripts/gpu_ab.sh
# AB_TEST (optional) runs once against each version before its first timing, e.g. the kernel's tests.
set -uo pipefail
cd "$(dirname "$0")/.."
: "${AB_VARIANT:?the folder holding version B of the swapped files}" "${AB_CMD:?the command to time}"
out=${OUT:-/tmp/mtpserve-ab}
mkdir -p "$out"
saved=$(mktemp -d)  # version A of the swapped files
builds=$(mktemp -d)  # each version's built extension
files=$(cd "$AB_VARIANT" && find . -type f | sed 's|^\./||')
for f in $files; do
  [ -f "$f" ] || { echo "$AB_VARIANT/$f has no counterpart in the tree" >&2; exit 2; }
  mkdir -p "$saved/$(dirname "$f")" && cp "$f" "$saved/$f"
done
STAGES=none bash scripts/gpu_check.sh > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
export PYTHONPATH=/tmp/site PATH=/usr/local/cuda/bin:$PATH CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)
extension=$(python3 -c 'import mtpserve._C as c; print(c.__file__)')
cp "$extension" "$builds/A.so"
for f in $files; do cp "$AB_VARIANT/$f" "$f"; done
python3 -m pip install --no-build-isolation --no-deps -e . > "$out/rebuild_B.log" 2>&1 \
  || { tail -40 "$out/rebuild_B.log"; exit 1; }
cp "$extension" "$builds/B.so"

use() {  # use A|B: put that version's files and built extension in place
  local from=$saved
  [ "$1" = B ] && from=$AB_VARIANT
  for f in $files; do cp "$from/$f" "$f"; done
  cp "$builds/$1.so" "$extension"
}

status=0
for run in A1 B1 A2 B2; do
  version=${run:0:1}
  use "$version"
  if [ -n "${AB_TEST:-}" ] && [ "${run:1}" = 1 ]; then
    echo "== tests, version $version"
    bash -c "$AB_TEST" > "$out/test_$version.log" 2>&1 || status=1
    tail -2 "$out/test_$version.log"
  fi
  echo "== $run"
  mkdir -p "$out/$run"
  RUN_OUT=$out/$run bash -c "$AB_CMD" 2>&1 | tee "$out/$run/output.txt" | tail -25 || status=1
done
use A
touch $files
# The device returns a limited number of files: one archive of the runs' folders comes back whole.
tar czf "$out/runs.tgz" -C "$out" A1 B1 A2 B2 && rm -rf "$out"/A1 "$out"/B1 "$out"/A2 "$out"/B2
exit $status
