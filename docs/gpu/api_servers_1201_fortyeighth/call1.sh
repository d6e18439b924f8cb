#!/usr/bin/env bash
# The forty-eighth session's first call (one H200, kind nvidia-h200, torch 2.11.0+cu130, bf16; carry .whl and .data):
# the same server with 1, 2 and 4 API-server processes (--api_server_count), fixed k = 3, the embedded model, CUDA
# graphs; against each, `mtpserve bench` at c = 64 (1,536 prompts) and c = 80 (1,920 prompts), two runs each
# (held-out ShareGPT cut to two turns, --ignore-eos, a warm-up of c requests first). CONCS sets other concurrencies
# (the fourth call: CONCS="1 16" ... call1.sh "1 4").
#   SHAREGPT=.data/sharegpt_heldout2.json.gz bash docs/gpu/api_servers_1201_fortyeighth/call1.sh [COUNTS]
# (NO_BUILD=1 SERVER_DEVICE="--dtype float32" PROMPTS_PER_C=1 RUNS=1 runs it on a CPU)
set -uo pipefail
: "${SHAREGPT:?the ShareGPT JSON (held-out split, two turns a record)}"
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
gunzip -c "$SHAREGPT" > /tmp/sharegpt.json
SECONDS=0
[ -n "${NO_BUILD:-}" ] || STAGES=none bash scripts/gpu_check.sh > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "built in $SECONDS s"
export PYTHONPATH=/tmp/site:$PWD/python PYTHONUNBUFFERED=1
count() {  # the number of API servers
  local n=$1 port=$((8100 + RANDOM % 800))
  python3 -m mtpserve.cli serve --port $port --api_server_count $n --num_speculative_tokens 3 \
    --speculative_policy fixed ${SERVER_DEVICE:---devices cuda:0 --dtype bfloat16} > "$OUT/api$n.server.log" 2>&1 &
  local pid=$!
  python3 -c "import time, urllib.request as u
for _ in range(240):
    try: u.urlopen('http://127.0.0.1:$port/health', timeout=2); break
    except OSError: time.sleep(0.5)"
  for c in ${CONCS:-64 80}; do
    for r in $(seq 0 $((${RUNS:-2} - 1))); do
      timeout 150 python3 -m mtpserve.cli bench --port $port --dataset-name sharegpt --dataset-path /tmp/sharegpt.json \
        --sharegpt-split held-out --ignore-eos --sharegpt-max-total-len 2000 --num-prompts $((${PROMPTS_PER_C:-24} * c)) \
        --max-concurrency $c --num-warmups $c --seed $r --disable-tqdm --save-result "$OUT/api$n.c$c.r$r.json" \
        > "$OUT/api$n.c$c.r$r.txt" 2>&1
      echo "api$n c$c r$r: $(grep -E 'Mean TPOT|Mean TTFT|Output token throughput|Engine busy|event loop busy|Frontend' \
        "$OUT/api$n.c$c.r$r.txt" | awk -F': *' '{printf "%s=%s  ", $1, $2}')"
    done
  done
  kill -INT $pid; wait $pid; echo "api$n server exit code $?"
}
for n in ${1:-1 4 2}; do count $n; done
tar czf "$OUT/runs${CONCS:+_c${CONCS// /_}}.tgz" -C "$OUT" $(cd "$OUT" && ls api*) && (cd "$OUT" && rm -f api*)
echo "total: $SECONDS s"
