#!/usr/bin/env bash
# The device call behind this folder, on 08a4ad8 (branch early-publish; reverted on main in 92a38a6), where a step
# publishes the tokens it sampled before it drafts
# (SHAREGPT: the held-out ShareGPT JSON cut to two turns a record):
#   1. the GPU engine tests (greedy MTP against k = 0, graphs, deferred fills) and the batch-invariance greedy tests
#   2. one request at a time, k = 0 and 3: TTFT and the prompt step (scripts/profile_prompt_step.py)
#   3. the serving sweep, greedy, c = 1 and 4: k = 0, 3 and adaptive, 48 prompts a cell, 3 repeats
set -uo pipefail
: "${SHAREGPT:?the ShareGPT JSON (held-out split) to sample prompts from}"
STAGES=none bash scripts/gpu_check.sh > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
timeout 150 python3 -m pytest -q -p no:cacheprovider -m cuda -rfE tests/test_cuda_engine.py tests/test_cuda_graphs.py \
  tests/test_cuda_deferred_fill.py tests/test_batch_invariance.py > $OUT/pytest.log 2>&1
grep -E "passed|failed|error" $OUT/pytest.log | tail -5
timeout 120 python3 scripts/profile_prompt_step.py --devices cuda:0 --ks 0 3 --requests 30 --out $OUT/prompt_step.md \
  2>&1 | grep -A3 "^## k"
SWEEP_ARGS="--ks 0,3 --concurrencies 1,4 --min-prompts 48 --prompts-factor 8" \
  bash docs/gpu/isolated_1127/calls.sh greedy_long_a | grep -v healthy
