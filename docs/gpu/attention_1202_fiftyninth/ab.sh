#!/usr/bin/env bash
# The A/B of calls 2 and 3 (on one H200, carry .whl and .ab): scripts/gpu_ab.sh builds the tree (A) and the variants in
# $VARIANTS, runs tests.sh against each (outputs on fixed inputs; the attention tests for $PYTEST_VERSIONS), then times
# them $ROUNDS times with bench_mla_attention.py at B = 1, 16 and 64, k = 0 and 3 (context 8192; $BENCH_ARGS added).
# Leaves ab.log, dumps.txt (each version's outputs against A's), ab_table.txt and kernels.txt (with --breakdown) in $OUT.
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp/mtpserve-ab}
here=docs/gpu/attention_1202_fiftyninth
export PYTEST_VERSIONS
AB_VARIANTS=$VARIANTS AB_TEST="bash $here/tests.sh" AB_ROUNDS=$ROUNDS \
  AB_CMD="timeout 120 python3 scripts/bench_mla_attention.py --batches 1,16,64 --ks 0,3 --reps 30 ${BENCH_ARGS:-} --out \$RUN_OUT" \
  bash scripts/gpu_ab.sh > "$out/ab.log" 2>&1
echo "gpu_ab status $?"
grep -E "^== tests|^version|dumped|passed|failed|ERROR SUMMARY" "$out/ab.log" | head -20
python3 docs/gpu/attention_1202_fiftyeighth/cmp_dumps.py /tmp/dumps | tee "$out/dumps.txt"
(cd "$out" && tar czf logs.tgz build.log rebuild_*.log environment.txt test_*.log 2>/dev/null \
  && rm -f build.log rebuild_*.log environment.txt test_*.log)
python3 scripts/ab_table.py "$out/runs.tgz" | tee "$out/ab_table.txt"
[ -z "${BENCH_ARGS:-}" ] || python3 $here/kernels.py "$out/runs.tgz" | tee "$out/kernels.txt"
