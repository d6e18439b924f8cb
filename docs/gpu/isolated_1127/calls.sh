#!/usr/bin/env bash
# The device calls behind this folder, one stage per call (each builds first; SHAREGPT: the held-out ShareGPT JSON):
#   bash docs/gpu/isolated_1127/calls.sh greedy | t15 steps | t15_long greedy_long |
#   t15_long_small | greedy_long_a | greedy_long_b
# Each runs the serving sweep with --isolated: one server alive at a time, a fresh one per method and repeat.
# SWEEP_ARGS (optional): more bench_mtp_sweep.py flags, after the stage's own (so they override them).
set -uo pipefail
: "${SHAREGPT:?the ShareGPT JSON (held-out split) to sample prompts from}"
STAGES=none bash scripts/gpu_check.sh > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1

sweep() {  # out-dir, seconds allowed, then bench_mtp_sweep.py's own arguments (later flags override earlier ones)
  local dir=$1 seconds=$2; shift 2
  timeout $seconds python3 scripts/bench_mtp_sweep.py --isolated --adaptive-k-max 3 --concurrencies 1,2,4,8,16,32,64,80 \
    --repeats 3 --min-prompts 48 --prompts-factor 8 --dataset-name sharegpt --dataset-path $SHAREGPT \
    --sharegpt-split held-out --ignore-eos --sharegpt-max-total-len 2000 --disable-tqdm \
    --out-dir $OUT/$dir "$@" ${SWEEP_ARGS:-} -- --devices cuda:0 --dtype bfloat16 > $OUT/$dir.log 2>&1
  [ -f $OUT/$dir/sweep.json ] && python3 scripts/bench_mtp_sweep.py --replot --out-dir $OUT/$dir > /dev/null 2>&1
  grep -E "healthy|error" $OUT/$dir.log | head -40
  cat $OUT/$dir/results.md
  rm -rf $OUT/$dir/raw; tar czf $OUT/$dir.tgz -C $OUT $dir && rm -rf $OUT/$dir
}

for stage in "$@"; do
  case $stage in
    # k = 1 is left out: it was the slowest MTP method at every concurrency of the GPU's earlier greedy sweeps
    greedy) sweep sweep_greedy 520 --ks 0,2,3 --temperature 0 ;;
    t15) sweep sweep_t15 520 --ks 0 --temperature 1.5 ;;
    # Three times as many prompts per cell: first where the first two sweeps missed (greedy_long), then everywhere.
    greedy_long) sweep sweep_greedy_long 230 --ks 0,2,3 --temperature 0 --concurrencies 4,64 --prompts-factor 24 ;;
    t15_long) sweep sweep_t15_long 290 --ks 0 --temperature 1.5 --concurrencies 16,32,64,80 --prompts-factor 24 ;;
    t15_long_small) sweep sweep_t15_long_small 480 --ks 0 --temperature 1.5 --concurrencies 1,2,4,8 \
                      --min-prompts 144 --prompts-factor 24 ;;
    greedy_long_a) sweep sweep_greedy_long_a 480 --ks 0,2,3 --temperature 0 --concurrencies 1,2,4 \
                     --min-prompts 144 --prompts-factor 24 ;;
    greedy_long_b) sweep sweep_greedy_long_b 480 --ks 0,2,3 --temperature 0 --concurrencies 8,16,32,64,80 \
                     --min-prompts 144 --prompts-factor 24 ;;
    steps) for slots in 4 8; do
             python3 docs/gpu/isolated_1127/continuous_steps.py $SHAREGPT --slots $slots --repeats 5 2>&1 | grep -v Loading
           done | tee $OUT/continuous_steps.txt ;;
  esac
done
