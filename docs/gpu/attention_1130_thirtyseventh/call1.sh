#!/usr/bin/env bash
# 2026-11-30, thirty-seventh session, call 1 on one H200 (carry .whl; make_variants.sh first). A = the tree,
# B = rope3, C = stream (make_variants.sh says what they are). scripts/gpu_ab.sh builds each once, runs the
# attention tests against B, and times A B C A B C; then the whole `cuda`-marked suite runs against A.
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp/mtpserve-ab}
AB_VARIANTS=".ab/rope3 .ab/stream" AB_TESTED=B AB_TEST="bash docs/gpu/attention_1130_thirtysixth/tests.sh" \
  AB_CMD="timeout 120 python3 scripts/bench_mla_attention.py --batches ${BATCHES:-16,64,128} --ks ${KS:-0,3} --reps 30 --out \$RUN_OUT" \
  bash scripts/gpu_ab.sh > "$out/ab.log" 2>&1
status=$?
grep -E "^== tests|passed|failed" "$out/ab.log" | head -8
export PYTHONPATH=/tmp/site
timeout 300 python3 -m pytest -q -p no:cacheprovider -m cuda -rfE --continue-on-collection-errors tests/ \
  > "$out/pytest.log" 2>&1 || status=1
echo "cuda suite, A: $(tail -1 "$out/pytest.log")"
python3 scripts/ab_table.py "$out/runs.tgz" | tee "$out/ab_table.txt"
exit $status
