#!/usr/bin/env bash
# The forty-first session's device calls (one H200, kind nvidia-h200, torch 2.11.0+cu130, bf16; carry .whl and .data)
# on the engine of a6f3024 (d8b1ca0): what the fortieth session's sweep left unmeasured on that engine. A cell has
# 12 x c prompts (at least 72), 3 repeats, a fresh server per method and repeat (--isolated), as in the fortieth
# session's docs/gpu/sweep_1130_fortieth/call.sh.
#   SHAREGPT=<held-out ShareGPT JSON cut to two turns, gzipped> bash docs/gpu/sweep_1201_fortyfirst/call.sh t15|greedy
#   t15:    temperature 1.5 at c = 1, 4, 16, 32, 64, 80, k = 0 and adaptive (c = 2 and 8 ran on a6f3024 last session)
#   greedy: greedy at c = 8, 16, 32, 64, 80 with every method, fixed k = 1 and 2 included
#   small:  greedy at c = 8 and 16 again (where greedy missed 0.95 of fixed k = 3) with longer cells, 24 x c
#           prompts (at least 144), and 5 repeats: k = 0, fixed k = 2 and 3, adaptive
#   t15_c80: temperature 1.5 at c = 80 again (0.932 of k = 0 in the t15 call), 24 x c prompts and 5 repeats
set -uo pipefail
: "${SHAREGPT:?the ShareGPT JSON (held-out split, two turns a record)}"
cd "$(dirname "$0")/../../.."
gunzip -c "$SHAREGPT" > /tmp/sharegpt.json
STAGES=none bash scripts/gpu_check.sh > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
cp "$OUT/environment.txt" "$OUT/environment_$1.txt" 2>/dev/null
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
sweep() {  # name, seconds allowed, then bench_mtp_sweep.py's own arguments (after the defaults: they win)
  local name=$1 seconds=$2; shift 2
  timeout "$seconds" python3 scripts/bench_mtp_sweep.py \
    --isolated --repeats 3 --min-prompts 72 --prompts-factor 12 --dataset-name sharegpt \
    --dataset-path /tmp/sharegpt.json --sharegpt-split held-out --ignore-eos --sharegpt-max-total-len 2000 \
    --disable-tqdm --out-dir "$OUT/$name" "$@" -- --devices cuda:0 --dtype bfloat16 2>&1 \
    | while IFS= read -r line; do printf '%(%s)T %s\n' -1 "$line"; done > "$OUT/$name.log"  # epoch seconds a line
  rm -rf "$OUT/$name/raw" "$OUT/$name"/*.png; tar czf "$OUT/$name.tgz" -C "$OUT" "$name" && rm -rf "$OUT/$name"
}
case ${1:?stage} in
  t15) sweep t15_c1_80 400 --ks 0 --adaptive-k-max 3 --temperature 1.5 --concurrencies 1,4,16,32,64,80 ;;
  greedy) sweep greedy_c8_80 560 --ks 0,1,2,3 --adaptive-k-max 3 --temperature 0 --concurrencies 8,16,32,64,80 ;;
  small) sweep greedy_c8_16 480 --ks 0,2,3 --adaptive-k-max 3 --temperature 0 --concurrencies 8,16 --repeats 5 \
           --min-prompts 144 --prompts-factor 24 ;;
  t15_c80) sweep t15_c80 300 --ks 0 --adaptive-k-max 3 --temperature 1.5 --concurrencies 80 --repeats 5 \
             --prompts-factor 24 ;;
esac
for f in "$OUT"/*.tgz; do echo "$f"; tar xzf "$f" -O --wildcards '*/results.md' | grep -E '^\| [0-9]+ \| MTP adaptive'; done
