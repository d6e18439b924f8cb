#!/usr/bin/env bash
# The fifty-second session's H200 calls (one H200, kind nvidia-h200, torch 2.11.0+cu130, bf16, CUDA graphs; carry .whl
# and .data) on main's engine and frontend since f695097 (the engine's outputs cross to the API servers as tuples
# built in C++), with the fiftieth and fifty-first sessions' sweep arguments: held-out ShareGPT prompts, --isolated (a
# fresh server per method and repeat), four API-server processes at every c. One call a stage, on one warm machine:
#   t15     the GPU test suite, then issue 14's temperature-1.5 sweep: k = 0 and adaptive at c = 1..80, 12 x c prompts
#           (at least 72), 3 repeats (the fifty-first session's stage t15, rerun on f695097)
#   open    the temperature-1.5 cells that sweep left under 0.97 (c = 16, 32, 80): 24 x c prompts, 5 repeats
#   rest    the t15 sweep's cells that call's time limit cut short (c = 8..80), 12 x c prompts, 3 repeats
#   greedy  the greedy cells f695097 was for: c = 64 and 80, fixed k = 3 and adaptive, 24 x c prompts, 3 repeats
#   SHAREGPT=.data/sharegpt_heldout2.json.gz bash docs/gpu/sweep_1202_fiftysecond/call.sh STAGE
set -uo pipefail
stage=${1:?stage: t15, open, rest or greedy}
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
SECONDS=0
STAGES=none bash scripts/gpu_check.sh > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "built in $SECONDS s"
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
  rm -rf "$OUT/$name/raw" "$OUT/$name"/*.png; tar czf "$OUT/$name.tgz" -C "$OUT" "$name" && rm -rf "$OUT/$name"
  tar xzf "$OUT/$name.tgz" -O --wildcards '*/results.md' | grep -E '^\| [0-9]+ \| MTP'
  echo "$name done at $SECONDS s"
}
case $stage in
  t15)
    STAGES=test bash scripts/gpu_check.sh > "$OUT/suite.log" 2>&1
    tail -1 "$OUT/pytest.log"; echo "suite done at $SECONDS s"
    sweep t15_c1_80 $((580 - SECONDS)) --ks 0 --temperature 1.5 --repeats 3 --prompts-factor 12 \
      --concurrencies 1,2,4,8,16,32,64,80 ;;
  open)
    sweep t15_open $((580 - SECONDS)) --ks 0 --temperature 1.5 --repeats 5 --prompts-factor 24 \
      --concurrencies 16,32,80 ;;
  rest)
    sweep t15_c8_80 $((580 - SECONDS)) --ks 0 --temperature 1.5 --repeats 3 --prompts-factor 12 \
      --concurrencies 8,16,32,64,80 ;;
  greedy)
    sweep greedy_c64_80 $((580 - SECONDS)) --ks 3 --temperature 0 --repeats 3 --prompts-factor 24 \
      --concurrencies 64,80 ;;
  *) echo "unknown stage $stage"; exit 2 ;;
esac
echo "total: $SECONDS s"
