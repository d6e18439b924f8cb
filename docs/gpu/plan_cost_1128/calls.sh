#!/usr/bin/env bash
# The device calls behind this folder (SHAREGPT: the held-out ShareGPT JSON), one stage per call:
#   bash docs/gpu/plan_cost_1128/calls.sh greedy_b | t15_long | t15_c64 | tests
# The code of ad72e83: the adaptive plan weighed by drafts alone (04a9e38); ad72e83's own change (reverted in dba4d23)
# defers fills, which never happens on a GPU. The sweep stages are the eighth session's
# serving sweeps (docs/gpu/isolated_1127/calls.sh); greedy_b leaves out fixed k = 2, which was never the best fixed
# k on the GPU, so that c = 8..80 fits one call. The offline A/B (ab_offline/) ran through scripts/gpu_ab.sh, with
# the command in this folder's part of docs/benchmarks.md.
set -uo pipefail
for stage in "$@"; do
  case $stage in
    greedy_b) SWEEP_ARGS="--ks 0,3" bash docs/gpu/isolated_1127/calls.sh greedy_long_b ;;
    t15_long) bash docs/gpu/isolated_1127/calls.sh t15_long ;;
    # t15_long's one miss (c = 64) again, with 5 repeats
    t15_c64) SWEEP_ARGS="--concurrencies 64 --repeats 5" bash docs/gpu/isolated_1127/calls.sh t15_long ;;
    # the GPU tests that run the adaptive policy (the engine's default), on the code of b93467d
    tests) STAGES=none bash scripts/gpu_check.sh > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
           PYTHONPATH=/tmp/site timeout 200 python3 -m pytest -q -p no:cacheprovider -m cuda -rfE \
             tests/test_cuda_deferred_fill.py tests/test_cuda_engine.py tests/test_cuda_graphs.py > $OUT/gpu_tests.txt 2>&1
           tail -1 $OUT/gpu_tests.txt ;;
  esac
done
