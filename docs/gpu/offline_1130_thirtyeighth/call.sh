#!/usr/bin/env bash
# 2026-11-30, thirty-eighth session, call 5 of the session on one H200 (carry .whl): issue 14's offline bars on this code, with the
# thirtieth session's commands: greedy k = 0, fixed k = 1..3 and adaptive (k_max 3) at batch 1, 8, 32, 64 with 10
# repeats in the balanced order, then temperature 1.5 (k = 0, fixed k = 3, adaptive) with 6.
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp/mtpserve-gpu}
mkdir -p "$out"
STAGES=none bash scripts/gpu_check.sh > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
export PYTHONPATH=/tmp/site
timeout 300 python3 scripts/bench_offline.py --devices cuda:0 --dtype bfloat16 --ks 0 1 2 3 --adaptive-k-max 3 \
  --batch-sizes 1 8 32 64 --max-tokens 128 --repeats 10 --out "$out/offline_greedy.json" > "$out/offline_greedy.log" 2>&1
status=$?
grep '^|' "$out/offline_greedy.log"
timeout 200 python3 scripts/bench_offline.py --devices cuda:0 --dtype bfloat16 --ks 0 3 --adaptive-k-max 3 \
  --batch-sizes 1 8 32 64 --max-tokens 128 --repeats 6 --temperature 1.5 --out "$out/offline_t15.json" \
  > "$out/offline_t15.log" 2>&1 || status=1
grep '^|' "$out/offline_t15.log"
exit $status
