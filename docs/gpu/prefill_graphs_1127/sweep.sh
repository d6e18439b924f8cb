#!/usr/bin/env bash
# the greedy serving sweep on 42c9da4 (prefill graphs on, the default).
set -uo pipefail
: "${SHAREGPT:?the ShareGPT JSON (held-out split) to sample prompts from}"
start=$(date +%s)
STAGES=none bash scripts/gpu_check.sh > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
echo "built at $(( $(date +%s) - start )) s"
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
left=$(( 585 - ($(date +%s) - start) ))
timeout $left python3 scripts/bench_mtp_sweep.py --ks 0,1,2,3 --adaptive-k-max 3 --concurrencies 1,2,4,8,16,32,64,80 \
  --repeats 3 --min-prompts 48 --prompts-factor 6 --dataset-name sharegpt --dataset-path $SHAREGPT \
  --sharegpt-split held-out --ignore-eos --sharegpt-max-total-len 2000 --disable-tqdm --temperature 0 \
  --out-dir $OUT/sweep -- --devices cuda:0 --dtype bfloat16 > $OUT/sweep.log 2>&1
echo "sweep rc $? at $(( $(date +%s) - start )) s (limit $left)"
tail -2 $OUT/sweep.log
rm -rf $OUT/sweep/raw; tar czf $OUT/sweep.tgz -C $OUT sweep && rm -rf $OUT/sweep
