#!/usr/bin/env bash
# piecewise prefill graphs on vs off, offline continuous batching (bench_continuous.py), then the GPU suite.
set -uo pipefail
: "${SHAREGPT:?the ShareGPT JSON (held-out split) to sample prompts from}"
start=$(date +%s)
STAGES=none bash scripts/gpu_check.sh > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
cp $OUT/environment.txt $OUT/env_keep.txt
echo "built at $(( $(date +%s) - start )) s"
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
timeout 260 python3 scripts/bench_continuous.py --devices cuda:0 --dtype bfloat16 --dataset-path $SHAREGPT \
  --prompts 256 --slots 32 64 --ks 0 --adaptive-k-max 3 --output-len 128 --repeats 3 --prefill-graph both \
  --out $OUT/continuous_prefill_graph.json > $OUT/continuous.txt 2>&1
echo "bench rc $? at $(( $(date +%s) - start )) s"; grep -v "Loading" $OUT/continuous.txt | tail -12
left=$(( 580 - ($(date +%s) - start) ))
timeout $left python3 -m pytest -q -p no:cacheprovider -m cuda -rfE --continue-on-collection-errors tests/ > $OUT/pytest.log 2>&1
echo "suite rc $? at $(( $(date +%s) - start )) s (limit $left)"; tail -1 $OUT/pytest.log; grep -E "^(FAILED|ERROR)" $OUT/pytest.log | head -20
