#!/usr/bin/env bash
# Prepared in the fifty-fourth session (no device time was left to it) for the next H200 calls (kind nvidia-h200,
# torch 2.11.0+cu130, bf16, CUDA graphs; carry .whl and .data), with the fiftieth to fifty-third sessions' sweep
# arguments: held-out ShareGPT prompts, --isolated (a fresh server per method and repeat), four API servers at every c.
#   phases  the GPU test suite (the first GPU run of 35711f8, 180ea07 and c47b44d), then this folder's
#           phases_every.patch (each engine prints its host phases every 2,000 decode-alone steps; read them with
#           `python3 ../sweep_1202_fiftythird/phases.py FILE new`): temperature 1.5, k = 0 and adaptive at c = 1 and 8,
#           24 x c prompts (at least 72), 3 repeats. Does one graph lookup a step (35711f8) remove the 1.6-3.5 us by
#           which adaptive built its step input more slowly?
#   t15     issue 14's temperature-1.5 sweep: k = 0 and adaptive at c = 1..80, 12 x c prompts, 3 repeats (run it in
#           two calls for 6 repeats; the cells' rounds then come from two machines)
#   SHAREGPT=.data/sharegpt_heldout2.json.gz bash docs/gpu/sweep_1202_fiftyfourth/call.sh STAGE
set -uo pipefail
stage=${1:?stage: phases or t15}
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
SECONDS=0
build() {  # a warm machine keeps its build; the patched file is rebuilt whichever way it last went
  touch cpp/engine/engine.cpp
  STAGES=none bash scripts/gpu_check.sh > "$OUT/build$1.log" 2>&1 || { tail -30 "$OUT/build$1.log"; exit 1; }
  echo "built$1 at $SECONDS s"
}
build ""
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
: "${SHAREGPT:?the ShareGPT JSON (held-out split, two turns a record)}"
gunzip -c "$SHAREGPT" > /tmp/sharegpt.json
sweep() {  # name, seconds allowed, then the sweep's own arguments
  local name=$1 seconds=$2; shift 2
  timeout "$seconds" python3 scripts/bench_mtp_sweep.py --isolated --min-prompts 72 --adaptive-k-max 3 \
    --dataset-name sharegpt --dataset-path /tmp/sharegpt.json --sharegpt-split held-out --ignore-eos \
    --sharegpt-max-total-len 2000 --disable-tqdm --out-dir "$OUT/$name" "$@" \
    -- --devices cuda:0 --dtype bfloat16 --api_server_count 4 2>&1 \
    | while IFS= read -r line; do printf '%(%s)T %s\n' -1 "$line"; done > "$OUT/$name.log"  # epoch seconds a line
  grep -E '^(\$ |PHASES)' "$OUT/$name"/server_*.log > "$OUT/$name.phases" 2>/dev/null
  rm -rf "$OUT/$name/raw" "$OUT/$name"/*.png; tar czf "$OUT/$name.tgz" -C "$OUT" "$name" && rm -rf "$OUT/$name"
  tar xzf "$OUT/$name.tgz" -O --wildcards '*/results.md' | grep -E '^\| [0-9]+ \| MTP'
  echo "$name done at $SECONDS s"
}
case $stage in
  phases)
    STAGES=test bash scripts/gpu_check.sh > "$OUT/suite.log" 2>&1
    tail -1 "$OUT/pytest.log"; echo "suite done at $SECONDS s"
    git apply "$here/phases_every.patch" || exit 1
    build _patched
    sweep phases_c1_8 $((580 - SECONDS)) --ks 0 --temperature 1.5 --repeats 3 --prompts-factor 24 \
      --concurrencies 1,8
    git checkout -- cpp/engine/engine.cpp ;;
  t15)
    sweep t15_c1_80 $((580 - SECONDS)) --ks 0 --temperature 1.5 --repeats 3 --prompts-factor 12 \
      --concurrencies 1,2,4,8,16,32,64,80 ;;
  *) echo "unknown stage $stage"; exit 2 ;;
esac
echo "total: $SECONDS s"
