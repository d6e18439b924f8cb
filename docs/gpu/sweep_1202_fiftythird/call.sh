#!/usr/bin/env bash
# The fifty-third session's H200 calls (one H200, kind nvidia-h200, torch 2.11.0+cu130, bf16, CUDA graphs; carry .whl
# and .data), with the fiftieth to fifty-second sessions' sweep arguments: held-out ShareGPT prompts, --isolated (a
# fresh server per method and repeat), four API-server processes at every c. One call a stage, each on the tree it
# was run from: phases and t15 on main at 76e2bc5 (f37753c's engine and frontend), after on be9c906, tests on ed1da14.
#   phases  the GPU test suite on main, then main with ../sweep_1202_fiftysecond/phases_every.patch (each engine prints
#           its host phases every 2,000 decode steps to its server log): temperature 1.5, k = 0 and adaptive at c = 1
#           and 8, 24 x c prompts (at least 72), 3 repeats
#   t15     issue 14's temperature-1.5 sweep on main: k = 0 and adaptive at c = 1..80, 12 x c prompts, 3 repeats
#   after   the policy's cost record moved behind the next launch (be9c906), with this folder's phases_every.patch
#           (the same clock on the moved code; the file now applies to c47b44d and later, where the check that some
#           sequence drafts joined the cost record behind the launch, timed in the same phase 11, and it counts only
#           the steps that decode alone): temperature 1.5, k = 0
#           and adaptive at c = 1, 4, 8 and 64, 12 x c prompts (at least 72), 3 repeats
#   tests   the GPU tests of the engine, its graphs and adaptive drafting with deferred fills on ed1da14 (both of this
#           session's engine changes; the device time left did not hold the whole suite)
# The fifty-fifth session ran t15 again with one address-space layout for every server (SERVER_CMD="setarch -R
# python3 -m mtpserve.cli serve", PYTHONHASHSEED=0 exported) and as launched.
#   SHAREGPT=.data/sharegpt_heldout2.json.gz bash docs/gpu/sweep_1202_fiftythird/call.sh STAGE
set -uo pipefail
stage=${1:?stage: phases, t15, after or tests}
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
SECONDS=0
build() {  # a warm machine keeps its build; the patched file is rebuilt whichever way it last went
  touch cpp/engine/engine.cpp
  STAGES=none bash scripts/gpu_check.sh > "$OUT/build$1.log" 2>&1 || { tail -30 "$OUT/build$1.log"; exit 1; }
  echo "built$1 at $SECONDS s"
}
[[ $stage == after || $stage == tests ]] || build ""  # these two build once, in their own way
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
: "${SHAREGPT:?the ShareGPT JSON (held-out split, two turns a record)}"
gunzip -c "$SHAREGPT" > /tmp/sharegpt.json
sweep() {  # name, seconds allowed, then the sweep's own arguments
  local name=$1 seconds=$2; shift 2
  timeout "$seconds" python3 scripts/bench_mtp_sweep.py --isolated --min-prompts 72 --adaptive-k-max 3 \
    --dataset-name sharegpt --dataset-path /tmp/sharegpt.json --sharegpt-split held-out --ignore-eos \
    --sharegpt-max-total-len 2000 --disable-tqdm --out-dir "$OUT/$name" ${SERVER_CMD:+--server-cmd "$SERVER_CMD"} "$@" \
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
    git apply "$here/../sweep_1202_fiftysecond/phases_every.patch" || exit 1
    build _patched
    sweep phases_c1_8 $((580 - SECONDS)) --ks 0 --temperature 1.5 --repeats 3 --prompts-factor 24 \
      --concurrencies 1,8
    git checkout -- cpp/engine/engine.cpp ;;
  t15)
    sweep t15_c1_80 $((580 - SECONDS)) --ks 0 --temperature 1.5 --repeats 3 --prompts-factor 12 \
      --concurrencies 1,2,4,8,16,32,64,80 ;;
  after)
    git apply "$here/phases_every.patch" || exit 1
    build _patched
    sweep after_c1_64 $((580 - SECONDS)) --ks 0 --temperature 1.5 --repeats 3 --prompts-factor 12 \
      --concurrencies 1,4,8,64
    git checkout -- cpp/engine/engine.cpp ;;
  tests)
    TESTS="tests/test_cuda_deferred_fill.py tests/test_cuda_engine.py tests/test_cuda_graphs.py" STAGES=test \
      bash scripts/gpu_check.sh > "$OUT/suite.log" 2>&1
    tail -1 "$OUT/pytest.log" ;;
  *) echo "unknown stage $stage"; exit 2 ;;
esac
echo "total: $SECONDS s"
