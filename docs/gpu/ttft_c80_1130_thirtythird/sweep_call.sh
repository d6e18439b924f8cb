#!/usr/bin/env bash
# The thirty-third session's second call (one H200, carry .whl):
#   SHAREGPT=<held-out ShareGPT JSON, two turns a record, gzipped> bash docs/gpu/ttft_c80_1130_thirtythird/sweep_call.sh
# The thirty-second session's temperature-1.5 cell at concurrency 80 (k = 0 against adaptive, k_max 3, five isolated
# repeats) again, now that the sweep keeps the server's own mean TTFT / TPOT / E2E of each repeat (raw/, every request's chunk times, is left out: too large to bring back).
set -uo pipefail
: "${SHAREGPT:?the held-out ShareGPT JSON cut to two turns, gzipped}"
gunzip -c "$SHAREGPT" > /tmp/sharegpt.json
STAGES=none bash scripts/gpu_check.sh > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
name=t15_c80_r5_server
timeout 480 python3 scripts/bench_mtp_sweep.py --isolated --repeats 5 --min-prompts 144 --prompts-factor 24 \
  --dataset-name sharegpt --dataset-path /tmp/sharegpt.json --sharegpt-split held-out --ignore-eos \
  --sharegpt-max-total-len 2000 --disable-tqdm --out-dir "$OUT/$name" --ks 0 --adaptive-k-max 3 --temperature 1.5 \
  --concurrencies 80 -- --devices cuda:0 --dtype bfloat16 > "$OUT/$name.log" 2>&1
python3 docs/gpu/ttft_c80_1130_thirtythird/server_latency.py "$OUT/$name/sweep.json" | tee "$OUT/server_latency.txt"
rm -rf "$OUT/$name"/*.png "$OUT/$name/raw"; tar czf "$OUT/$name.tgz" -C "$OUT" "$name" && rm -rf "$OUT/$name"
