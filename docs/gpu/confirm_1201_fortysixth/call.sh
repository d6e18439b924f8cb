#!/usr/bin/env bash
# The forty-sixth session's first call on one H200 (kind nvidia-h200, torch 2.11.0+cu130; carry .whl) on main's
# engine (5255ebd: b78b160's plan_ahead and d729cac's class verdict, neither run on a GPU before): the GPU test suite,
# the bf16 divergence rate of greedy MTP against k = 0 (adaptive policy) with and without --batch_invariant, then
# issue 14's offline bars in bf16: greedy with k = 0, fixed k = 1..3 and adaptive (3 interleaved repeats) and
# temperature 1.5 with k = 0 and adaptive (9 interleaved repeats), at batch 1, 8, 32 and 64:
#   bash docs/gpu/confirm_1201_fortysixth/call.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
SECONDS=0
STAGES="test rate" bash scripts/gpu_check.sh > "$OUT/check.log" 2>&1
echo "build, suite and rate: $SECONDS s"; grep -E "passed|failed|diverged|prompts" "$OUT/check.log" | tail -12
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
mkdir -p "$OUT/invariant"
SECONDS=0
timeout 240 python3 scripts/mtp_divergence.py --devices cuda:0 --dtype bfloat16 --batches 1 8 32 \
  --batch-invariant --out "$OUT/invariant" > "$OUT/invariant.log" 2>&1
echo "batch-invariant rate: exit $?, $SECONDS s"; tail -8 "$OUT/invariant.log"
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
