#!/usr/bin/env bash
# The forty-ninth session's second and third calls (one H200, kind nvidia-h200, torch 2.11.0+cu130, bf16; carry .whl
# and .data): issue 14's greedy serving cells at c = 64 (call 2) and c = 80 (call 3) with four API-server processes
# before the engine (--api_server_count 4), each on a socket of its own (fc3a125). The fortieth session's sweep arguments otherwise: k = 0, fixed k = 3 and
# adaptive (k_max 3), --isolated (a fresh server per method and repeat), 24 x c prompts, 5 repeats.
#   SHAREGPT=.data/sharegpt_heldout2.json.gz bash docs/gpu/api_servers_1201_fortyninth/call2.sh 64   (then 80)
set -uo pipefail
: "${SHAREGPT:?the ShareGPT JSON (held-out split, two turns a record)}"
c=${1:?concurrency}
cd "$(dirname "$0")/../../.."
gunzip -c "$SHAREGPT" > /tmp/sharegpt.json
SECONDS=0
STAGES=none bash scripts/gpu_check.sh > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "built in $SECONDS s"
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
name=greedy_c${c}_api4
timeout 560 python3 scripts/bench_mtp_sweep.py --isolated --repeats 5 --min-prompts 72 --prompts-factor 24 \
  --dataset-name sharegpt --dataset-path /tmp/sharegpt.json --sharegpt-split held-out --ignore-eos \
  --sharegpt-max-total-len 2000 --disable-tqdm --out-dir "$OUT/$name" --ks 0,3 --adaptive-k-max 3 --temperature 0 \
  --concurrencies $c -- --devices cuda:0 --dtype bfloat16 --api_server_count 4 2>&1 \
  | while IFS= read -r line; do printf '%(%s)T %s\n' -1 "$line"; done > "$OUT/$name.log"
rm -rf "$OUT/$name/raw" "$OUT/$name"/*.png; tar czf "$OUT/$name.tgz" -C "$OUT" "$name" && rm -rf "$OUT/$name"
tar xzf "$OUT/$name.tgz" -O --wildcards '*/results.md' | grep -E '^\|' | head -40
echo "total: $SECONDS s"
