#!/usr/bin/env bash
# The device call behind this folder: greedy MTP against k = 0 in bf16 on the GPU under today's adaptive policy
# (the default) and the fixed one: the batch-invariance tests of the engine end to end (tests/test_batch_invariance.py,
# greedy, cuda), then scripts/mtp_divergence.py with --batch_invariant for each policy (expected: no sequence
# differs), and without it for adaptive (the bf16 divergence rate the mode removes).
set -uo pipefail
STAGES=none bash scripts/gpu_check.sh > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
timeout 150 python3 -m pytest -q -p no:cacheprovider -m cuda -rfE tests/test_batch_invariance.py -k greedy \
  > $OUT/pytest_greedy.log 2>&1; tail -3 $OUT/pytest_greedy.log
for policy in adaptive fixed; do
  timeout 110 python3 scripts/mtp_divergence.py --devices cuda:0 --dtype bfloat16 --batches 1 8 32 64 --batch-invariant \
    --speculative-policy $policy --out $OUT 2>&1 | grep '^|'
done
timeout 110 python3 scripts/mtp_divergence.py --devices cuda:0 --dtype bfloat16 --batches 1 8 32 64 --out $OUT 2>&1 \
  | grep '^|'
