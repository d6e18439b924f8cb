#!/usr/bin/env bash
# 2026-11-30, thirty-seventh session, call 5 on one H200 (carry .whl; make_variants.sh first): B = 16 split fewer
# ways, so that its splits combine in clusters. A = the tree (8 splits, the combine kernel), B = splits6,
# C = splits4, timed A B C twice by scripts/gpu_ab.sh at B = 16, k = 0..3; the attention tests against B.
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp/mtpserve-ab}
AB_VARIANTS=".ab/splits6 .ab/splits4" AB_TESTED=B AB_TEST="bash docs/gpu/attention_1130_thirtysixth/tests.sh" \
  AB_CMD="timeout 100 python3 scripts/bench_mla_attention.py --batches ${BATCHES:-16} --ks ${KS:-0,1,2,3} --reps 30 --out \$RUN_OUT" \
  bash scripts/gpu_ab.sh > "$out/ab.log" 2>&1
status=$?
grep -E "^== tests|passed|failed" "$out/ab.log" | head -4
(cd "$out" && tar czf logs.tgz build.log rebuild_*.log environment.txt test_*.log && rm -f build.log rebuild_*.log environment.txt test_*.log)
python3 scripts/ab_table.py "$out/runs.tgz" | tee "$out/ab_table.txt"
exit $status
