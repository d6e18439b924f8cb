#!/usr/bin/env bash
# The forty-fourth session's offline call (one H200, kind nvidia-h200, torch 2.11.0+cu130, bf16; carry .whl): issue
# 14's offline bars with bench_offline.py's untimed run of each method at each batch size before its repeats (this
# session's bench change; the engine is 50b29c1's): the commands of scripts/gpu_check.sh's adaptive stage with
# longer time limits, greedy (k = 0, fixed k = 1..3, adaptive k_max 3) and temperature 1.5 (k = 0, fixed k = 3,
# adaptive) at batch 1, 8, 32 and 64, 3 interleaved repeats. A second call (`nine`, the same machine, warm: the first
# call's build reused where /tmp/site is still there) runs both again with 9 interleaved repeats:
#   bash docs/gpu/offline_1201_fortyfourth/call.sh [nine]
set -uo pipefail
cd "$(dirname "$0")/../../.."
if [ "${1:-}" != nine ] || [ ! -d /tmp/site ]; then
  STAGES=none bash scripts/gpu_check.sh > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
fi
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
offline() {  # name, seconds allowed, then bench_offline.py's own arguments
  local name=$1 seconds=$2; shift 2
  SECONDS=0
  timeout "$seconds" python3 scripts/bench_offline.py --devices cuda:0 --dtype bfloat16 --adaptive-k-max 3 \
    --batch-sizes 1 8 32 64 --out "$OUT/$name.json" "$@" > "$OUT/$name.log" 2>&1
  echo "$name: exit $?, $SECONDS s"
  grep '^|' "$OUT/$name.log"
}
if [ "${1:-}" = nine ]; then
  offline offline_adaptive_gpu_r9 280 --ks 0 1 2 3 --repeats 9
  offline offline_adaptive_gpu_t15_r9 180 --ks 0 3 --temperature 1.5 --repeats 9
else
  offline offline_adaptive_gpu 280 --ks 0 1 2 3 --repeats 3
  offline offline_adaptive_gpu_t15 180 --ks 0 3 --temperature 1.5 --repeats 3
fi
