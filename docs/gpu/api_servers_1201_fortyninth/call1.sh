#!/usr/bin/env bash
# The forty-ninth session's first call (one H200, kind nvidia-h200, torch 2.11.0+cu130, bf16; carry .whl and .data):
# the forty-eighth session's call 1 (docs/gpu/api_servers_1201_fortyeighth/call1.sh) on fc3a125, where each API
# server listens on a socket of its own (SO_REUSEPORT): the same server with 1, 2 and 4 API servers, fixed k = 3,
# the embedded model, CUDA graphs; `mtpserve bench` at c = 64 (1,536 prompts) and c = 80 (1,920 prompts), two runs
# each (held-out ShareGPT cut to two turns, --ignore-eos, a warm-up of c requests first). 10 s into each run it
# records how many of the client's connections each child process of the server holds (spread.py).
#   SHAREGPT=.data/sharegpt_heldout2.json.gz bash docs/gpu/api_servers_1201_fortyninth/call1.sh [COUNTS]
set -uo pipefail
: "${SHAREGPT:?the ShareGPT JSON (held-out split, two turns a record)}"
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
gunzip -c "$SHAREGPT" > /tmp/sharegpt.json
SECONDS=0
STAGES=none bash scripts/gpu_check.sh > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "built in $SECONDS s"
export PYTHONPATH=/tmp/site:$PWD/python PYTHONUNBUFFERED=1
count() {  # the number of API servers
  local n=$1 port=$((8100 + RANDOM % 800))
  python3 -m mtpserve.cli serve --port $port --api_server_count $n --num_speculative_tokens 3 \
    --speculative_policy fixed --devices cuda:0 --dtype bfloat16 > "$OUT/api$n.server.log" 2>&1 &
  local pid=$!
  python3 -c "import time, urllib.request as u
for _ in range(240):
    try: u.urlopen('http://127.0.0.1:$port/health', timeout=2); break
    except OSError: time.sleep(0.5)"
  for c in ${CONCS:-64 80}; do
    for r in 0 1; do
      timeout 150 python3 -m mtpserve.cli bench --port $port --dataset-name sharegpt --dataset-path /tmp/sharegpt.json \
        --sharegpt-split held-out --ignore-eos --sharegpt-max-total-len 2000 --num-prompts $((24 * c)) \
        --max-concurrency $c --num-warmups $c --seed $r --disable-tqdm --save-result "$OUT/api$n.c$c.r$r.json" \
        > "$OUT/api$n.c$c.r$r.txt" 2>&1 &
      local bench=$!
      sleep 10
      local spread; spread=$(python3 "$here/spread.py" $pid $port)
      wait $bench
      echo "api$n c$c r$r: $(grep -E 'Mean TPOT|Mean TTFT|Output token throughput|Engine busy|event loop busy' \
        "$OUT/api$n.c$c.r$r.txt" | awk -F': *' '{printf "%s=%s  ", $1, $2}') connections per child: $spread"
    done
  done
  kill -INT $pid; wait $pid; echo "api$n server exit code $?"
}
for n in ${1:-1 2 4}; do count $n; done
tar czf "$OUT/runs.tgz" -C "$OUT" $(cd "$OUT" && ls api*) && (cd "$OUT" && rm -f api*)
echo "total: $SECONDS s"
