#!/usr/bin/env bash
# The device calls behind this folder, one stage per call (each builds first; SHAREGPT: the held-out ShareGPT JSON):
#   bash docs/gpu/trim_guard_1127/calls.sh tests offline | greedy_a | greedy_b
# The code of 8dfb08e: the policy's trimmed plans never replace a better uniform one, and a margin on blaming acceptance.
# greedy_a and greedy_b are the eighth session's stages greedy_long_a and greedy_long_b, run on this code; their
# folders here are sweep_greedy_a and sweep_greedy_b. The offline A/B (ab_offline/) ran through scripts/gpu_ab.sh,
# with the command in this folder's part of docs/benchmarks.md.
set -uo pipefail
: "${SHAREGPT:?the ShareGPT JSON (held-out split) to sample prompts from}"
STAGES=none bash scripts/gpu_check.sh > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1

offline() {  # out-file, then bench_offline.py's own arguments
  local out=$1; shift
  python3 scripts/bench_offline.py --devices cuda:0 --dtype bfloat16 --adaptive-k-max 3 --batch-sizes 1 8 32 64 \
    --repeats 9 --max-tokens 256 --out $OUT/$out "$@" | grep '^|'
}

for stage in "$@"; do
  case $stage in
    tests) timeout 300 python3 -m pytest -q -p no:cacheprovider -m cuda -rfE --continue-on-collection-errors tests/ \
             > $OUT/gpu_tests.txt 2>&1; tail -1 $OUT/gpu_tests.txt ;;
    offline) offline offline_greedy_r9.json --ks 0 1 2 3
             offline offline_t15_r9.json --ks 0 --temperature 1.5 ;;
    greedy_a) bash docs/gpu/isolated_1127/calls.sh greedy_long_a ;;
    greedy_b) bash docs/gpu/isolated_1127/calls.sh greedy_long_b ;;
  esac
done
