#!/usr/bin/env bash
# 2026-11-30, thirty-eighth session, call 1 on one H200 (carry .whl and .ab): the split combine's two callers on
# one pair of helpers, load_partials then store_combined (the tree), against main's (B: .ab/oldcombine, the three
# files as `git show 4ff000f:<path>` writes them). scripts/gpu_ab.sh builds both, runs the attention tests and the
# memcheck against A, and times A B A B at B = 1 and 16 (the combine kernel, 32 and 8 splits) and 64 (the in-cluster
# combine, 2 splits), k = 0..3.
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp/mtpserve-ab}
AB_VARIANTS=".ab/oldcombine" AB_TESTED=A AB_TEST="SANITIZE=1 bash docs/gpu/attention_1130_thirtysixth/tests.sh" \
  AB_CMD="timeout 100 python3 scripts/bench_mla_attention.py --batches 1,16,64 --ks 0,1,2,3 --reps 30 --out \$RUN_OUT" \
  bash scripts/gpu_ab.sh > "$out/ab.log" 2>&1
status=$?
grep -E "^== tests|passed|failed|ERROR SUMMARY" "$out/ab.log" | head -6
(cd "$out" && tar czf logs.tgz build.log rebuild_*.log environment.txt test_*.log && rm -f build.log rebuild_*.log environment.txt test_*.log)
python3 scripts/ab_table.py "$out/runs.tgz" | tee "$out/ab_table.txt"
exit $status
