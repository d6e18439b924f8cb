#!/usr/bin/env bash
# The forty-seventh session's first call (one H200, kind nvidia-h200, torch 2.11.0+cu130, bf16; carry .whl and
# .data): where a request waits before the engine at greedy c = 64 (issue 14's one missed GPU cell, where the client's
# TTFT exceeds the server's by 70-85 ms). One server per variant (fixed k = 3, the embedded model, CUDA graphs), three
# `mtpserve bench` runs against it (held-out ShareGPT, 1536 prompts, --ignore-eos, c = 64), server and client traced
# by site/sitecustomize.py:
#   base       main's frontend (the forty-seventh session's first call; on later code, main's tokenizing of then)
#   product    the build's own tokenizing, untouched (call 2)
#   switch200  sys.setswitchinterval(200 µs) in the server (a thread waiting for the GIL gets it sooner)
#   inline     the prompt tokenized on the event loop instead of on a tokenizer thread
#   batch      the tokenizer threads encode with the GIL released (the tokenizers library's encode_batch)
#   batch200   batch and switch200
# (NO_BUILD=1 SERVER_DEVICE="--dtype float32" NUM_PROMPTS=48 CONC=8 RUNS=2 runs it on a CPU; RUNS: bench runs a server)
#   SHAREGPT=.data/sharegpt_heldout2.json.gz bash docs/gpu/frontend_1201_fortyseventh/call1.sh [VARIANTS]
set -uo pipefail
: "${SHAREGPT:?the ShareGPT JSON (held-out split, two turns a record)}"
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
gunzip -c "$SHAREGPT" > /tmp/sharegpt.json
[ -n "${NO_BUILD:-}" ] || STAGES=none bash scripts/gpu_check.sh > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
export PYTHONPATH=$here/site:/tmp/site:$PWD/python PYTHONUNBUFFERED=1
variant() {  # name, then environment assignments for the server
  local name=$1 port=$((8100 + RANDOM % 800)); shift
  env "$@" FRONTEND_TRACE="$OUT/$name.server.json" python3 -m mtpserve.cli serve --port $port \
    --num_speculative_tokens 3 --speculative_policy fixed ${SERVER_DEVICE:---devices cuda:0 --dtype bfloat16} > "$OUT/$name.server.log" 2>&1 &
  local pid=$!
  python3 -c "import time, urllib.request as u
for _ in range(240):
    try: u.urlopen('http://127.0.0.1:$port/health', timeout=2); break
    except OSError: time.sleep(0.5)"
  for r in $(seq 0 $((${RUNS:-3} - 1))); do
    FRONTEND_TRACE="$OUT/$name.client$r.json" timeout 120 python3 -m mtpserve.cli bench --port $port \
      --dataset-name sharegpt --dataset-path /tmp/sharegpt.json --sharegpt-split held-out --ignore-eos \
      --sharegpt-max-total-len 2000 --num-prompts ${NUM_PROMPTS:-1536} --max-concurrency ${CONC:-64} --num-warmups ${CONC:-64} --seed $r \
      --disable-tqdm --save-result "$OUT/$name.r$r.json" > "$OUT/$name.bench$r.txt" 2>&1
    echo "$name r$r: $(grep -E 'Mean TPOT|Mean TTFT|Output token throughput|own mean TTFT|event loop busy|tokens per chunk' \
      "$OUT/$name.bench$r.txt" | awk -F': *' '{printf "%s=%s  ", $1, $2}')"
  done
  sleep 2.5; kill -INT $pid; wait $pid
  python3 - "$OUT/$name.server.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("  server:", {k: (v["mean"], v["p50"], v["p90"]) for k, v in d.items() if isinstance(v, dict)})
print("  leaves:", d["leaves"][:8])
PY
  gzip -f "$OUT/$name".r?.json
  tar czf "$OUT/$name.tgz" -C "$OUT" $(cd "$OUT" && ls "$name".*) && (cd "$OUT" && ls "$name".* | grep -vx "$name.tgz" | xargs rm -f)
}
for v in ${1:-base inline batch batch200 switch200}; do
  case $v in
    base) variant base ;;
    product) variant product FRONTEND_KEEP_ENCODE=1 ;;
    switch200) variant switch200 FRONTEND_SWITCH_US=200 ;;
    inline) variant inline FRONTEND_INLINE_TOKENIZE=1 ;;
    batch) variant batch FRONTEND_ENCODE_BATCH=1 ;;
    batch200) variant batch200 FRONTEND_ENCODE_BATCH=1 FRONTEND_SWITCH_US=200 ;;
  esac
done
