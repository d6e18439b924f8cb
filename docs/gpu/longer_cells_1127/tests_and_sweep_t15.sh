#!/usr/bin/env bash
# GPU call 1: build HEAD, the whole GPU suite, then the temperature-1.5 serving sweep (k = 0 vs adaptive) with larger cells.
set -uo pipefail
start=$(date +%s)
: "${SHAREGPT:?the ShareGPT JSON (held-out split) to sample prompts from}"
STAGES=none bash scripts/gpu_check.sh > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
cp $OUT/environment.txt $OUT/env_keep.txt
echo "built at $(( $(date +%s) - start )) s"
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
timeout 200 python3 -m pytest -q -p no:cacheprovider -m cuda -rfE --continue-on-collection-errors tests/ > $OUT/pytest.log 2>&1
echo "suite rc $? at $(( $(date +%s) - start )) s"; tail -1 $OUT/pytest.log; grep -E "^(FAILED|ERROR)" $OUT/pytest.log | head -20
left=$(( 585 - ($(date +%s) - start) ))
timeout $left python3 scripts/bench_mtp_sweep.py --ks 0 --adaptive-k-max 3 --concurrencies 1,2,4,8,16,32,64,80 \
  --repeats 3 --min-prompts 48 --prompts-factor 8 --dataset-name sharegpt --dataset-path $SHAREGPT \
  --sharegpt-split held-out --ignore-eos --sharegpt-max-total-len 2000 --disable-tqdm --temperature 1.5 \
  --out-dir $OUT/sweep -- --devices cuda:0 --dtype bfloat16 > $OUT/sweep.log 2>&1
echo "sweep rc $? at $(( $(date +%s) - start )) s (limit $left)"
tail -3 $OUT/sweep.log
rm -rf $OUT/sweep/raw; tar czf $OUT/sweep.tgz -C $OUT sweep && rm -rf $OUT/sweep
