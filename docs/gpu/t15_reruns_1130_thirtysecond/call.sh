#!/usr/bin/env bash
# The thirty-second session's call (a lent 2 x H200, kind nvidia-h200-x2, carry .whl):
#   SHAREGPT=<held-out ShareGPT JSON, two turns a record, gzipped> bash docs/gpu/t15_reruns_1130_thirtysecond/call.sh
# Temperature 1.5, k = 0 against adaptive (k_max 3), 5 isolated repeats: c = 1, 2, 4 on GPU 0 and c = 80 on GPU 1.
set -uo pipefail
: "${SHAREGPT:?the held-out ShareGPT JSON cut to two turns, gzipped}"
gunzip -c "$SHAREGPT" > /tmp/sharegpt.json
STAGES=none bash scripts/gpu_check.sh > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
half=$(( $(nproc) / 2 ))
sweep() {  # gpu, name, seconds, then bench_mtp_sweep.py's arguments
  local gpu=$1 name=$2 seconds=$3; shift 3
  local cpus; [ "$gpu" = 0 ] && cpus="0-$((half - 1))" || cpus="$half-$((2 * half - 1))"
  CUDA_VISIBLE_DEVICES=$gpu taskset -c "$cpus" timeout "$seconds" python3 scripts/bench_mtp_sweep.py \
    --isolated --repeats 5 --min-prompts 144 --prompts-factor 24 --dataset-name sharegpt \
    --dataset-path /tmp/sharegpt.json --sharegpt-split held-out --ignore-eos --sharegpt-max-total-len 2000 --disable-tqdm \
    --out-dir "$OUT/$name" --ks 0 --adaptive-k-max 3 --temperature 1.5 "$@" -- --devices cuda:0 --dtype bfloat16 \
    > "$OUT/$name.log" 2>&1
  rm -rf "$OUT/$name/raw" "$OUT/$name"/*.png; tar czf "$OUT/$name.tgz" -C "$OUT" "$name" && rm -rf "$OUT/$name"
}
sweep 0 t15_c1_4_r5 520 --concurrencies 1,2,4 &
sweep 1 t15_c80_r5 520 --concurrencies 80
wait
for f in "$OUT"/*.tgz; do tar xzf "$f" -O --wildcards '*/results.md' | grep -A8 'The adaptive policy against'; done
