#!/usr/bin/env bash
# 2026-12-01, forty-third session, calls 1 and 2 on one H200 (carry .whl), from a tree with grid_combine.diff applied
# (`git apply docs/gpu/attention_1201_fortythird/grid_combine.diff`; not landed) and .ab/main holding af651e7's
# cpp/kernels/cuda/mla_attention_wgmma.cu (untracked, it travels with the tree): the grid combine (A: splits that no
# cluster holds combined by the attention kernel's own blocks through global memory, in a cooperative launch) against
# main's kernel (B). scripts/gpu_ab.sh builds both, runs the attention tests and the memcheck against A, and times
# A B A B at B = 1 (32 splits) and 16 (8 splits), where the grid combine runs, and 64 (2 splits, in clusters),
# k = 0..3. Call 1 ran an earlier form of the diff that took no counters while a graph was captured (its graphs kept
# the combine kernel); call 2 ran the diff as it is.
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp/mtpserve-ab}
AB_VARIANTS=".ab/main" AB_TESTED=A AB_TEST="SANITIZE=1 bash docs/gpu/attention_1130_thirtysixth/tests.sh" \
  AB_CMD="timeout 100 python3 scripts/bench_mla_attention.py --batches 1,16,64 --ks 0,1,2,3 --reps 30 --out \$RUN_OUT" \
  bash scripts/gpu_ab.sh > "$out/ab.log" 2>&1
status=$?
grep -E "^== tests|passed|failed|ERROR SUMMARY|Timeout|timed out" "$out/ab.log" | head -12
(cd "$out" && tar czf logs.tgz build.log rebuild_*.log environment.txt test_*.log && rm -f build.log rebuild_*.log environment.txt test_*.log)
python3 scripts/ab_table.py "$out/runs.tgz" | tee "$out/ab_table.txt"
exit $status
