#!/usr/bin/env bash
# The fortieth session's second device call (one H200, kind nvidia-h200, torch 2.11.0+cu130, bf16; carry .whl and
# .data): what the session's device time allowed of issue 14's GPU serving sweep after greedy c = 1, 2, 4 (the first
# call, docs/gpu/full_sweep_1129/call.sh one, on 2 x H200). The same client and server arguments as that script,
# with a cell's prompts halved (12 x c, at least 72) and fewer methods: greedy c = 8, 16, 32, 64, 80 with k = 0,
# fixed k = 3 (the best fixed k at every c in the last full GPU sweep but c = 32, where k = 2 led by 1%) and adaptive
# (k_max 3). A server instance takes about 7 s to start, so 45 of them take most of the call. A third call (t15, the
# same machine, warm) ran temperature 1.5 at c = 1, 2, 4, 8 with k = 0 and adaptive. Those three ran on 8fbc02b,
# whose retires_on_arrival never retired a sequence; a fourth (t15_fixed, a fresh machine, on the fix) ran c = 2, 8.
#   SHAREGPT=<held-out ShareGPT JSON cut to two turns, gzipped> bash docs/gpu/sweep_1130_fortieth/call.sh greedy|t15
#   ... call.sh run NAME SECONDS ARGS...: one sweep named NAME of bench_mtp_sweep.py with ARGS after the defaults
#   above (added for the forty-first session's calls, docs/gpu/sweep_1201_fortyfirst/call.sh)
set -uo pipefail
: "${SHAREGPT:?the ShareGPT JSON (held-out split, two turns a record)}"
cd "$(dirname "$0")/../../.."
gunzip -c "$SHAREGPT" > /tmp/sharegpt.json
STAGES=none bash scripts/gpu_check.sh > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
sweep() {  # name, seconds allowed, then bench_mtp_sweep.py's own arguments
  local name=$1 seconds=$2; shift 2
  timeout "$seconds" python3 scripts/bench_mtp_sweep.py \
    --isolated --repeats 3 --min-prompts 72 --prompts-factor 12 --dataset-name sharegpt \
    --dataset-path /tmp/sharegpt.json --sharegpt-split held-out --ignore-eos --sharegpt-max-total-len 2000 \
    --disable-tqdm --out-dir "$OUT/$name" "$@" -- --devices cuda:0 --dtype bfloat16 2>&1 \
    | while IFS= read -r line; do printf '%(%s)T %s\n' -1 "$line"; done > "$OUT/$name.log"  # epoch seconds a line
  rm -rf "$OUT/$name/raw" "$OUT/$name"/*.png; tar czf "$OUT/$name.tgz" -C "$OUT" "$name" && rm -rf "$OUT/$name"
}
case ${1:?stage} in
  greedy) sweep greedy_c8_80 480 --ks 0,3 --adaptive-k-max 3 --temperature 0 --concurrencies 8,16,32,64,80 ;;
  t15) sweep t15_c1_8 330 --ks 0 --adaptive-k-max 3 --temperature 1.5 --concurrencies 1,2,4,8 ;;
  t15_fixed) sweep t15_c2_8_fixed 140 --ks 0 --adaptive-k-max 3 --temperature 1.5 --concurrencies 2,8 ;;
  run) shift; sweep "$@" ;;
esac
for f in "$OUT"/*.tgz; do echo "$f"; tar xzf "$f" -O --wildcards '*/results.md' | grep -E '^\| [0-9]+ \| MTP adaptive'; done
