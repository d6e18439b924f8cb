#!/usr/bin/env bash
# The fifty-first session's H200 calls (one H200, kind nvidia-h200, torch 2.11.0+cu130, bf16, CUDA graphs; carry .whl
# and .data) on main's engine and frontend (four API-server processes at every c, --isolated: a fresh server per
# method and repeat, the fiftieth session's sweep arguments, docs/gpu/sweep_1201_fiftieth/call.sh). One call a stage,
# on one warm machine:
#   suite   the attention kernel table (B = 1, 16, 64, 128 at k = 0..3) and the GPU test suite
#   t15     issue 14's temperature-1.5 cells with the frontend of the greedy sweep: k = 0 and adaptive at c = 1..80,
#           12 x c prompts (at least 72), 3 repeats
#   greedy  the greedy cells the fiftieth session left open: c = 32 (fixed k = 2 and 3, adaptive; 5 repeats), whose
#           medians missed 0.95, and c = 64 (fixed k = 3, adaptive; 24 x c prompts, 3 repeats), where two
#           non-median repeats ran k = 0 on 7% and 11% of steps with nothing kept to say why
#   wake    main with wake_after_launch.patch (not kept; the stage applies it to the machine's copy): a step's outputs
#           wake the server's reader once the next step is launched (--wake_after_launch true, the patch's default on
#           GPUs) against at once (false): greedy, k = 0 and adaptive at c = 4, 16, 32, 12 x c prompts (at least 72),
#           one repeat a sweep, the two settings alternating, twice each
#   SHAREGPT=.data/sharegpt_heldout2.json.gz bash docs/gpu/sweep_1202_fiftyfirst/call.sh STAGE
set -uo pipefail
stage=${1:?stage: suite, t15, greedy or wake}
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
[ "$stage" = wake ] && { patch -p1 --forward < "$here/wake_after_launch.patch" > /dev/null || exit 1; }
SECONDS=0
STAGES=none bash scripts/gpu_check.sh > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "built in $SECONDS s"
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
sweep() {  # name, seconds allowed, then the sweep's own arguments
  local name=$1 seconds=$2; shift 2
  timeout "$seconds" python3 scripts/bench_mtp_sweep.py --isolated --min-prompts 72 --adaptive-k-max 3 \
    --dataset-name sharegpt --dataset-path /tmp/sharegpt.json --sharegpt-split held-out --ignore-eos \
    --sharegpt-max-total-len 2000 --disable-tqdm --out-dir "$OUT/$name" "$@" \
    -- --devices cuda:0 --dtype bfloat16 --api_server_count 4 ${SERVER_ARGS:-} 2>&1 \
    | while IFS= read -r line; do printf '%(%s)T %s\n' -1 "$line"; done > "$OUT/$name.log"  # epoch seconds a line
  rm -rf "$OUT/$name/raw" "$OUT/$name"/*.png; tar czf "$OUT/$name.tgz" -C "$OUT" "$name" && rm -rf "$OUT/$name"
  tar xzf "$OUT/$name.tgz" -O --wildcards '*/results.md' | grep -E '^\| [0-9]+ \| MTP'
  echo "$name done at $SECONDS s"
}
case $stage in
  suite)
    mkdir -p "$OUT/table"
    timeout 240 python3 scripts/bench_mla_attention.py --batches 1,16,64,128 --ks 0,1,2,3 --out "$OUT/table" \
      > "$OUT/table/bench.log" 2>&1
    tail -22 "$OUT/table/bench.log"
    STAGES=test bash scripts/gpu_check.sh ;;
  t15|greedy|wake)
    : "${SHAREGPT:?the ShareGPT JSON (held-out split, two turns a record)}"
    gunzip -c "$SHAREGPT" > /tmp/sharegpt.json ;;&
  t15)
    sweep t15_c1_80 $((575 - SECONDS)) --ks 0 --temperature 1.5 --repeats 3 --prompts-factor 12 \
      --concurrencies 1,2,4,8,16,32,64,80 ;;
  greedy)
    sweep greedy_c32 330 --ks 2,3 --temperature 0 --repeats 5 --prompts-factor 12 --concurrencies 32
    sweep greedy_c64 $((575 - SECONDS)) --ks 3 --temperature 0 --repeats 3 --prompts-factor 24 --concurrencies 64 ;;
  wake)
    left=4
    for round in 1 2; do
      for wake in false true; do
        SERVER_ARGS="--wake_after_launch $wake" sweep "wake_${wake}_$round" $(( (575 - SECONDS) / left )) \
          --ks 0 --temperature 0 --repeats 1 --prompts-factor 12 --concurrencies 4,16,32
        left=$((left - 1))
      done
    done ;;
  *) echo "unknown stage $stage"; exit 2 ;;
esac
echo "total: $SECONDS s"
