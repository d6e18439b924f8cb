#!/usr/bin/env bash
# the temperature-1.5 serving sweep (k = 0 vs adaptive) on 42c9da4, reduced prompts per cell to fit the budget.
set -uo pipefail
: "${SHAREGPT:?the ShareGPT JSON (held-out split) to sample prompts from}"
start=$(date +%s)
STAGES=none bash scripts/gpu_check.sh > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
echo "built at $(( $(date +%s) - start )) s"
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
timeout 150 python3 scripts/bench_mtp_sweep.py --ks 0 --adaptive-k-max 3 --concurrencies 1,2,4,8,16,32,64,80 \
  --repeats 3 --min-prompts 24 --prompts-factor 3 --dataset-name sharegpt --dataset-path $SHAREGPT \
  --sharegpt-split held-out --ignore-eos --sharegpt-max-total-len 2000 --disable-tqdm --temperature 1.5 \
  --out-dir $OUT/sweep_t15 -- --devices cuda:0 --dtype bfloat16 > $OUT/sweep_t15.log 2>&1
echo "sweep rc $? at $(( $(date +%s) - start )) s"
rm -rf $OUT/sweep_t15/raw; cp $OUT/sweep_t15/sweep.json $OUT/sweep_t15.json 2>/dev/null; cp $OUT/sweep_t15/results.md $OUT/results_t15.md 2>/dev/null
tail -3 $OUT/sweep_t15.log
