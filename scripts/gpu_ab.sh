#!/usr/bin/env bash
# A/B of several versions of some source files on one GPU machine, in one device call (device tool; carry .whl
# and the variant folders). Version A is the tree as it is; versions B, C, ... are the tree with every file under
# each folder of $AB_VARIANTS swapped in (same relative paths; $AB_VARIANT names a single one). Builds each
# version once, keeping each build's extension. Then runs $AB_CMD $AB_ROUNDS times (default 2) in the order
# A B C ... A B C ..., each run with its version's files and extension in place, so that drift of the machine
# shows as a difference between the runs of one version and no rebuild spends device time between them. Each
# run's output goes to its own folder (the command sees it as $RUN_OUT: A1, B1, ...), all archived at the end as
# $OUT/runs.tgz (the device tool returns only so many files). The tree ends as A with A's extension, and the
# machine's next build (it keeps build folders between calls) compiles the swapped files again: a later call's
# copy of the tree carries older times than the last version's objects, so gpu_check.sh touches the files listed
# in build/gpu_ab_swapped.txt before it builds.
#   AB_VARIANTS=".ab/new .ab/other" AB_CMD='python3 scripts/bench_mla_attention.py --batches 16,64 --out $RUN_OUT' \
#     bash scripts/gpu_ab.sh
# AB_TEST (optional) runs once against each version before its first timing, e.g. the kernel's tests; AB_TESTED
# (optional) limits it to some versions' letters, e.g. "A C".
set -uo pipefail
cd "$(dirname "$0")/.."
folders=${AB_VARIANTS:-${AB_VARIANT:-}}
: "${folders:?AB_VARIANTS: the folders holding the other versions of the swapped files}"
: "${AB_CMD:?the command to time}"
out=${OUT:-/tmp/mtpserve-ab}
mkdir -p "$out"
saved=$(mktemp -d)  # version A of the swapped files
builds=$(mktemp -d)  # each version's built extension
letters=(B C D E F G H)
declare -A folder_of=([A]=$saved)
versions=(A)
for dir in $folders; do
  [ ${#versions[@]} -le ${#letters[@]} ] || { echo "at most $(( ${#letters[@]} + 1 )) versions" >&2; exit 2; }
  v=${letters[$(( ${#versions[@]} - 1 ))]}
  folder_of[$v]=$dir
  versions+=("$v")
  echo "version $v: $dir"
done
files=$(for dir in $folders; do (cd "$dir" && find . -type f | sed 's|^\./||'); done | sort -u)
for f in $files; do
  [ -f "$f" ] || { echo "$f (from a variant folder) has no counterpart in the tree" >&2; exit 2; }
  mkdir -p "$saved/$(dirname "$f")" && cp "$f" "$saved/$f"
done

put() {  # put <version>: A's files, then that version's own
  for f in $files; do cp "$saved/$f" "$f"; done
  [ "$1" = A ] && return
  (cd "${folder_of[$1]}" && find . -type f | sed 's|^\./||' | while read -r f; do cp "$f" "$OLDPWD/$f"; done)
}

STAGES=none bash scripts/gpu_check.sh > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
export PYTHONPATH=/tmp/site PATH=/usr/local/cuda/bin:$PATH CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)
extension=$(python3 -c 'import mtpserve._C as c; print(c.__file__)')
cp "$extension" "$builds/A.so"
for v in "${versions[@]:1}"; do
  put "$v"
  python3 -m pip install --no-build-isolation --no-deps -e . > "$out/rebuild_$v.log" 2>&1 \
    || { tail -40 "$out/rebuild_$v.log"; exit 1; }
  cp "$extension" "$builds/$v.so"
done

use() {  # use <version>: its files and its built extension in place
  put "$1"
  cp "$builds/$1.so" "$extension"
}

status=0
runs=()
for round in $(seq "${AB_ROUNDS:-2}"); do
  for v in "${versions[@]}"; do
    use "$v"
    if [ -n "${AB_TEST:-}" ] && [ "$round" = 1 ] && [[ " ${AB_TESTED:-${versions[*]}} " == *" $v "* ]]; then
      echo "== tests, version $v"
      bash -c "$AB_TEST" > "$out/test_$v.log" 2>&1 || status=1
      tail -2 "$out/test_$v.log"
    fi
    run=$v$round
    runs+=("$run")
    echo "== $run"
    mkdir -p "$out/$run"
    RUN_OUT=$out/$run bash -c "$AB_CMD" 2>&1 | tee "$out/$run/output.txt" | tail -25 || status=1
  done
done
use A
touch $files
mkdir -p build && echo $files > build/gpu_ab_swapped.txt
# The device returns a limited number of files: one archive of the runs' folders comes back whole.
tar czf "$out/runs.tgz" -C "$out" "${runs[@]}" && (cd "$out" && rm -rf "${runs[@]}")
exit $status
