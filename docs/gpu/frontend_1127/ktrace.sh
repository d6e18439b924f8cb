#!/usr/bin/env bash
# adaptive (k_max 3) at c = 64 and 80 on the GPU: /metrics scraped every 50 ms (steps by k, running, engine steps)
# to see when the policy runs k = 0.
set -uo pipefail
STAGES=none bash scripts/gpu_check.sh > /tmp/build.log 2>&1 || { tail -20 /tmp/build.log; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
port=8123; res=/tmp/kt; mkdir -p $res
python3 -m mtpserve.cli serve --port $port --num_speculative_tokens 3 --devices cuda:0 --dtype bfloat16 > $res/server.log 2>&1 &
pid=$!
for i in $(seq 180); do curl -sf http://127.0.0.1:$port/health > /dev/null && break; sleep 1; done
python3 -m mtpserve.cli bench --port $port --dataset-name random --random-input-len 64 --random-output-len 64 --num-prompts 32 \
  --max-concurrency 16 --disable-tqdm > /dev/null 2>&1
python3 - $port > $res/trace.tsv <<'PY' &
import sys, time, urllib.request
port = sys.argv[1]
t0 = time.monotonic()
while time.monotonic() - t0 < 60:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
    v = {}
    for line in text.splitlines():
        if line.startswith("mtpserve:spec_decode_step_k_bucket"):
            le = line.split('le="')[1].split('"')[0]; v["le" + le] = float(line.rsplit(" ", 1)[1])
        elif line.startswith(("mtpserve:num_requests_running", "mtpserve:engine_steps_total", "mtpserve:engine_prompt_steps_total",
                              "mtpserve:spec_decode_num_retired_sequences_total")):
            v[line.split("{")[0]] = float(line.rsplit(" ", 1)[1])
    print(f"{time.monotonic() - t0:.3f}\t" + "\t".join(f"{k}={x:g}" for k, x in sorted(v.items())), flush=True)
    time.sleep(0.05)
PY
tracer=$!
for c in 64 80 64 80; do
  python3 -m mtpserve.cli bench --port $port --dataset-name sharegpt --dataset-path ${SHAREGPT:?held-out ShareGPT JSON} --sharegpt-split held-out \
    --ignore-eos --sharegpt-max-total-len 2000 --num-prompts $((c * 6)) --max-concurrency $c --num-warmups 0 --disable-tqdm > $res/bench_$c.txt 2>&1
  echo "c=$c done at $(date +%s.%N | cut -c1-14): $(grep -E 'Output token throughput|Mean TPOT' $res/bench_$c.txt | awk -F: '{printf "%s=%s |", $1, $2}' | tr -s ' ')"
  sleep 1
done
kill $tracer; kill $pid; wait $pid 2>/dev/null
tar czf $OUT/kt.tgz -C $res .
