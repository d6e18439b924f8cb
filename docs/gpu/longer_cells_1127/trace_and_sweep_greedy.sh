#!/usr/bin/env bash
# GPU call 2: the greedy serving sweep at c = 16..80 with larger cells and 5 repeats; where the MTP engine's k = 0 steps
# lose time at temperature 1.5 (trace_adaptive_steps --against-k0).
set -uo pipefail
start=$(date +%s)
: "${SHAREGPT:?the ShareGPT JSON (held-out split) to sample prompts from}"
STAGES=none bash scripts/gpu_check.sh > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
cp $OUT/environment.txt $OUT/env_keep.txt
echo "built at $(( $(date +%s) - start )) s"
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
timeout 120 python3 scripts/trace_adaptive_steps.py --devices cuda:0 --dtype bfloat16 --batch 64 --temperature 1.5 \
  --against-k0 --runs 6 --short > $OUT/trace_t15_b64.txt 2>&1
echo "trace rc $? at $(( $(date +%s) - start )) s"; grep -v Loading $OUT/trace_t15_b64.txt | tail -8
left=$(( 585 - ($(date +%s) - start) ))
timeout $left python3 scripts/bench_mtp_sweep.py --ks 0,1,2,3 --adaptive-k-max 3 --concurrencies ${CONC:-16,32,64,80} \
  --repeats 5 --min-prompts 48 --prompts-factor ${FACTOR:-8} --dataset-name sharegpt --dataset-path $SHAREGPT \
  --sharegpt-split held-out --ignore-eos --sharegpt-max-total-len 2000 --disable-tqdm --temperature 0 \
  --out-dir $OUT/sweep -- --devices cuda:0 --dtype bfloat16 > $OUT/sweep.log 2>&1
echo "sweep rc $? at $(( $(date +%s) - start )) s (limit $left)"
tail -3 $OUT/sweep.log
rm -rf $OUT/sweep/raw; tar czf $OUT/sweep.tgz -C $OUT sweep && rm -rf $OUT/sweep
