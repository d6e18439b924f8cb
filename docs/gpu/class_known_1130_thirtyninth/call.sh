#!/usr/bin/env bash
# 2026-11-30, thirty-ninth session, one call on one H200 (carry .whl and .ab): a sampling class's record known from 16
# verifications of draft 1 (the tree) against 64 (B: .ab/class64, cpp/engine/acceptance_stats.cpp as main had it).
# scripts/gpu_ab.sh builds both, runs the policy tests and the GPU engine tests that use the adaptive policy against
# A, and runs issue 14's temperature-1.5 offline cells (the thirtieth session's command: k = 0 and adaptive, 6
# repeats in the balanced order) A B A B A B. Then the greedy offline cells once on A, the thirtieth session's
# command with 10 repeats.
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp/mtpserve-ab}
mkdir -p "$out"
AB_VARIANTS=".ab/class64" AB_ROUNDS=3 AB_TESTED=A \
  AB_TEST="python3 -m pytest -q -p no:cacheprovider tests/test_speculation_policy.py tests/test_cuda_deferred_fill.py tests/test_cuda_graphs.py" \
  AB_CMD="timeout 150 python3 scripts/bench_offline.py --devices cuda:0 --dtype bfloat16 --ks 0 --adaptive-k-max 3 --batch-sizes 1 8 32 64 --max-tokens 128 --repeats 6 --temperature 1.5 --out \$RUN_OUT/offline_t15.json" \
  bash scripts/gpu_ab.sh > "$out/ab.log" 2>&1
status=$?
grep -E "^== |passed|failed|^\| " "$out/ab.log" | head -60
export PYTHONPATH=/tmp/site
timeout 200 python3 scripts/bench_offline.py --devices cuda:0 --dtype bfloat16 --ks 0 1 2 3 --adaptive-k-max 3 \
  --batch-sizes 1 8 32 64 --max-tokens 128 --repeats 10 --out "$out/offline_greedy.json" > "$out/offline_greedy.log" 2>&1 \
  || status=1
grep '^|' "$out/offline_greedy.log"
(cd "$out" && tar czf logs.tgz build.log rebuild_*.log environment.txt test_*.log ab.log offline_greedy.log 2>/dev/null \
  && rm -f build.log rebuild_*.log environment.txt test_*.log ab.log offline_greedy.log)
exit $status
