#!/usr/bin/env bash
# GPU call 5: offline adaptive vs k = 0 and fixed k (greedy, 9 repeats of 256 tokens) and at temperature 1.5 (9 repeats), bf16, graphs on.
set -uo pipefail
start=$(date +%s)
STAGES=none bash scripts/gpu_check.sh > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
cp $OUT/environment.txt $OUT/env_keep.txt
echo "built at $(( $(date +%s) - start )) s"
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
timeout 250 python3 scripts/bench_offline.py --devices cuda:0 --dtype bfloat16 --ks 0 1 2 3 --adaptive-k-max 3 \
  --batch-sizes 1 8 32 64 --repeats 9 --max-tokens 256 --out $OUT/offline_adaptive_gpu_r9.json > $OUT/offline_greedy.txt 2>&1
echo "greedy rc $? at $(( $(date +%s) - start )) s"; grep '^|' $OUT/offline_greedy.txt
left=$(( 590 - ($(date +%s) - start) ))
timeout $left python3 scripts/bench_offline.py --devices cuda:0 --dtype bfloat16 --ks 0 --adaptive-k-max 3 \
  --batch-sizes 1 8 32 64 --repeats 9 --max-tokens 256 --temperature 1.5 --out $OUT/offline_adaptive_gpu_t15_r9.json > $OUT/offline_t15.txt 2>&1
echo "t15 rc $? at $(( $(date +%s) - start )) s (limit $left)"; grep '^|' $OUT/offline_t15.txt
