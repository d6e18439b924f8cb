#!/usr/bin/env bash
# The twenty-fifth session's device calls (lent H200s, torch 2.11.0+cu130, bf16; carry .whl), one stage each:
#   bash docs/gpu/untested_aging_1129/call.sh suite|instances|ab|policy|greedy|clusters
# suite: the GPU suite and kernel benchmarks on 2cb5308 (suite_2cb5308_pytest.log, mla_attention.json,
# bench_moe.json); instances: four identical engines in one process (engine_instances.txt); ab: the offline greedy
# A/B of b0edcd7 (A) against 2cb5308's policy files (B, put in .ab/old), A B A B, with the greedy batch-invariance
# tests on each (ab_offline_runs.tgz, ab_test_*.log); policy: the policy's GPU tests and temperature 1.5 offline on
# b0edcd7 (pytest_policy.log, offline_t15.json); greedy: greedy offline, k = 0, fixed k = 3, adaptive
# (offline_greedy.json); clusters: how many thread-block clusters of each size the GPU holds (cluster_occupancy.txt).
set -uo pipefail
cd "$(dirname "$0")/../../.."
build() { STAGES=none bash scripts/gpu_check.sh > /dev/null 2>&1; export PYTHONPATH=/tmp/site; }
case ${1:?stage} in
  suite) STAGES="test bench" bash scripts/gpu_check.sh ;;
  instances) build
    python3 scripts/bench_engine_instances.py --devices cuda:0 --dtype bfloat16 --batch-sizes 8 64 --instances 4 \
      --repeats 5 --profile --top 45 > "$OUT/engine_instances.txt" 2>&1 ;;
  ab) AB_VARIANT=.ab/old AB_TEST='python3 -m pytest -q -p no:cacheprovider -m cuda tests/test_batch_invariance.py -k greedy' \
      AB_CMD='timeout 120 python3 scripts/bench_offline.py --devices cuda:0 --dtype bfloat16 --batch-sizes 1 8 32 64 --ks 3 --adaptive-k-max 3 --repeats 4 --max-tokens 128 --out $RUN_OUT/offline.json 2>&1 | grep "^|"' \
      bash scripts/gpu_ab.sh ;;
  policy) build
    python3 -m pytest -q -p no:cacheprovider -m cuda tests/test_cuda_deferred_fill.py tests/test_cuda_engine.py \
      tests/test_cuda_graphs.py tests/test_speculation_policy.py tests/test_adaptive_speculation.py > "$OUT/pytest_policy.log" 2>&1
    python3 scripts/bench_offline.py --devices cuda:0 --dtype bfloat16 --batch-sizes 1 8 32 64 --ks 0 --adaptive-k-max 3 \
      --temperature 1.5 --repeats 4 --out "$OUT/offline_t15.json" ;;
  greedy) build
    python3 scripts/bench_offline.py --devices cuda:0 --dtype bfloat16 --batch-sizes 1 8 32 64 --ks 0 3 \
      --adaptive-k-max 3 --repeats 6 --out "$OUT/offline_greedy.json" ;;
  clusters) nvcc -arch=sm_90a -o /tmp/cluster_occupancy docs/gpu/untested_aging_1129/cluster_occupancy.cu \
      && /tmp/cluster_occupancy > "$OUT/cluster_occupancy.txt" ;;
esac
