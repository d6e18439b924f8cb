#!/usr/bin/env bash
# The thirty-third session's call (one H200, carry .whl):
#   SHAREGPT=<held-out ShareGPT JSON, two turns a record, gzipped> bash docs/gpu/ttft_c80_1130_thirtythird/call.sh
# Temperature 1.5 at concurrency 80, k = 0 against adaptive (k_max 3), one server instance per run, alternating:
# every request's chunk times (the client's --save-result) and the server's own TTFT / TPOT / E2E histograms
# (/metrics before and after each run), to find where the adaptive server's earlier first tokens come from.
set -uo pipefail
: "${SHAREGPT:?the held-out ShareGPT JSON cut to two turns, gzipped}"
gunzip -c "$SHAREGPT" > /tmp/sharegpt.json
STAGES=none bash scripts/gpu_check.sh > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
dir=/tmp/ttft_c80 && mkdir -p $dir
run() {  # name, round, then the server's MTP flags
  local name=$1 round=$2 port=$((20000 + RANDOM % 20000)); shift 2
  python3 -m mtpserve.cli serve --port $port "$@" --devices cuda:0 --dtype bfloat16 > $dir/server_${name}_$round.log 2>&1 &
  local pid=$!
  for _ in $(seq 120); do curl -sf localhost:$port/health > /dev/null && break; sleep 1; done
  local bench="python3 -m mtpserve.cli bench --port $port --dataset-name sharegpt --dataset-path /tmp/sharegpt.json
    --sharegpt-split held-out --ignore-eos --sharegpt-max-total-len 2000 --max-concurrency 80 --temperature 1.5
    --num-warmups 0 --disable-tqdm"
  $bench --num-prompts 240 --seed 1 > $dir/warmup_${name}_$round.log 2>&1  # graphs, the policy's warm-up
  curl -sf localhost:$port/metrics > $dir/metrics_before_${name}_$round.txt
  $bench --num-prompts 1920 --save-result $dir/${name}_$round.json > $dir/bench_${name}_$round.log 2>&1
  curl -sf localhost:$port/metrics > $dir/metrics_after_${name}_$round.txt
  kill -INT $pid; wait $pid
}
for round in 1 2 3; do
  if [ $((round % 2)) = 1 ]; then
    run base $round --num_speculative_tokens 0 --speculative_policy fixed
    run adaptive $round --num_speculative_tokens 3 --speculative_policy adaptive
  else
    run adaptive $round --num_speculative_tokens 3 --speculative_policy adaptive
    run base $round --num_speculative_tokens 0 --speculative_policy fixed
  fi
done
python3 docs/gpu/ttft_c80_1130_thirtythird/analyse.py $dir | tee $OUT/analysis.txt
tar czf $OUT/runs.tgz -C /tmp ttft_c80
