#!/usr/bin/env bash
# The device calls behind this folder, one stage per call (each builds first; SHAREGPT: the held-out ShareGPT JSON):
#   bash docs/gpu/trim_guard_1127/calls.sh tests offline | greedy_a | greedy_b | t15_a | t15_b
# The code of 8dfb08e: the policy's trimmed plans never replace a better uniform one, and a margin on blaming acceptance.
set -uo pipefail
: "${SHAREGPT:?the ShareGPT JSON (held-out split) to sample prompts from}"
STAGES=none bash scripts/gpu_check.sh > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1

sweep() {  # out-dir, seconds allowed, then bench_mtp_sweep.py's own arguments (later flags override earlier ones)
  local dir=$1 seconds=$2; shift 2
  timeout $seconds python3 scripts/bench_mtp_sweep.py --isolated --adaptive-k-max 3 --repeats 3 --min-prompts 144 \
    --prompts-factor 24 --dataset-name sharegpt --dataset-path $SHAREGPT --sharegpt-split held-out --ignore-eos \
    --sharegpt-max-total-len 2000 --disable-tqdm --out-dir $OUT/$dir "$@" -- --devices cuda:0 --dtype bfloat16 \
    > $OUT/$dir.log 2>&1
  [ -f $OUT/$dir/sweep.json ] && python3 scripts/bench_mtp_sweep.py --replot --out-dir $OUT/$dir > /dev/null 2>&1
  grep -E "healthy|error" $OUT/$dir.log | head -40
  cat $OUT/$dir/results.md
  rm -rf $OUT/$dir/raw; tar czf $OUT/$dir.tgz -C $OUT $dir && rm -rf $OUT/$dir
}
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
    # k = 1 is left out: it was the slowest MTP method at every concurrency of the GPU's earlier greedy sweeps
    greedy_a) sweep sweep_greedy_a 480 --ks 0,2,3 --temperature 0 --concurrencies 1,2,4 ;;
    greedy_b) sweep sweep_greedy_b 480 --ks 0,2,3 --temperature 0 --concurrencies 8,16,32,64,80 ;;
    t15_a) sweep sweep_t15_a 480 --ks 0 --temperature 1.5 --concurrencies 1,2,4,8 ;;
    t15_b) sweep sweep_t15_b 480 --ks 0 --temperature 1.5 --concurrencies 16,32,64,80 ;;
  esac
done
