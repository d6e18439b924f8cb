#!/usr/bin/env bash
# 2026-11-30, thirty-seventh session, call 6 on one H200 (carry .whl): the combine kernel that loads every split's
# partial and lse at once (the tree) against the one before (B: its four files under .ab/oldcombine, as
# `git show d95b162:<path>` writes them). scripts/gpu_ab.sh builds both, runs the attention tests and the
# memcheck against A, and times A B A B at B = 1 (32 splits) and 16 (8 splits), both through the combine kernel.
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp/mtpserve-ab}
AB_VARIANTS=".ab/oldcombine" AB_TESTED=A AB_TEST="SANITIZE=1 bash docs/gpu/attention_1130_thirtysixth/tests.sh" \
  AB_CMD="timeout 100 python3 scripts/bench_mla_attention.py --batches ${BATCHES:-1,16} --ks ${KS:-0,3} --reps 30 --breakdown --out \$RUN_OUT" \
  bash scripts/gpu_ab.sh > "$out/ab.log" 2>&1
status=$?
grep -E "^== tests|passed|failed|ERROR SUMMARY" "$out/ab.log" | head -6
grep -E "^context" "$out/ab.log" | head -16
(cd "$out" && tar czf logs.tgz build.log rebuild_*.log environment.txt test_*.log && rm -f build.log rebuild_*.log environment.txt test_*.log)
python3 scripts/ab_table.py "$out/runs.tgz" | tee "$out/ab_table.txt"
exit $status
