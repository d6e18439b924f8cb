#!/usr/bin/env bash
# The forty-fifth session's confirmation call on one H200 (kind nvidia-h200, torch 2.11.0+cu130, bf16; carry .whl):
# main's engine (4b3c070's cost model, unchanged since) through the GPU test suite and issue 14's offline bars:
# greedy with k = 0, fixed k = 1..3 and adaptive (k_max 3), 3 interleaved repeats, and temperature 1.5 with k = 0
# and adaptive, 9 interleaved repeats, at batch 1, 8, 32 and 64:
#   bash docs/gpu/confirm_1201_fortyfifth/call.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
SECONDS=0
STAGES=test bash scripts/gpu_check.sh > "$OUT/check.log" 2>&1
echo "build and suite: $SECONDS s"; grep -E "passed|failed" "$OUT/check.log" | tail -3
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
offline() {  # name, seconds allowed, then bench_offline.py's own arguments
  local name=$1 seconds=$2; shift 2
  SECONDS=0
  timeout "$seconds" python3 scripts/bench_offline.py --devices cuda:0 --dtype bfloat16 --adaptive-k-max 3 \
    --batch-sizes 1 8 32 64 --out "$OUT/$name.json" "$@" > "$OUT/$name.log" 2>&1
  echo "$name: exit $?, $SECONDS s"
  grep '^|' "$OUT/$name.log" | cut -d'|' -f2-8,16,18
}
offline offline_greedy 210 --ks 0 1 2 3 --repeats 3
offline offline_t15 150 --ks 0 --temperature 1.5 --repeats 9
