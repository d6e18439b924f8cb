#!/usr/bin/env bash
# The twenty-ninth session's device calls (a lent 2 x H200, kind nvidia-h200-x2, torch 2.11.0+cu130, bf16; carry
# .whl): issue 14's serving sweep at every concurrency on one commit, k = 0, fixed k = 1, 2, 3 and adaptive (k_max 3)
# greedy, k = 0 and adaptive at temperature 1.5; one server at a time on each GPU (--isolated), 24 x c prompts a cell
# and at least 144, 3 repeats. The two GPUs run two sweeps side by side, each pinned to its own half of the host's
# cores (its server, its client): every ratio still comes from one sweep on one GPU.
#   SHAREGPT=<held-out ShareGPT JSON cut to two turns, or it gzipped> bash docs/gpu/full_sweep_1129/call.sh one|two|three
#   one:   greedy c = 1 on GPU 0; greedy c = 2, 4 on GPU 1
#   two:   greedy c = 8, 16, 32 on GPU 0; greedy c = 64, 80 on GPU 1
#   three: temperature 1.5 c = 1, 2, 4, 8 on GPU 0; the GPU test suite, then temperature 1.5 c = 16, 32, 64, 80 on GPU 1
#   four:  (one H200) are slow server instances slow GPUs? k = 0 at c = 80, 6 server instances, with the GPU's clocks,
#          power, temperature and clock-event reasons logged every 100 ms (clocks.csv) and each cell's end time
#          (clocks_c80.log)
# Stages one to three ran before stage four and the epoch seconds at the head of each sweep log line were added, with
# the same arguments (--adaptive-k-max 3 then sat in sweep() itself).
set -uo pipefail
: "${SHAREGPT:?the ShareGPT JSON (held-out split, two turns a record)}"
cd "$(dirname "$0")/../../.."
case $SHAREGPT in *.gz) gunzip -c "$SHAREGPT" > /tmp/sharegpt.json && SHAREGPT=/tmp/sharegpt.json ;; esac
STAGES=none bash scripts/gpu_check.sh > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
cp "$OUT/environment.txt" "$OUT/environment_$1.txt" 2>/dev/null
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
half=$(( $(nproc) / 2 ))
pin() {  # gpu, then a command: run on that GPU alone, on its half of the cores
  local gpu=$1; shift
  local cpus; [ "$gpu" = 0 ] && cpus="0-$((half - 1))" || cpus="$half-$((2 * half - 1))"
  CUDA_VISIBLE_DEVICES=$gpu taskset -c "$cpus" "$@"
}
sweep() {  # gpu, name, seconds allowed, then bench_mtp_sweep.py's own arguments
  local gpu=$1 name=$2 seconds=$3; shift 3
  pin "$gpu" timeout "$seconds" python3 scripts/bench_mtp_sweep.py \
    --isolated --repeats 3 --min-prompts 144 --prompts-factor 24 --dataset-name sharegpt \
    --dataset-path "$SHAREGPT" --sharegpt-split held-out --ignore-eos --sharegpt-max-total-len 2000 --disable-tqdm \
    --out-dir "$OUT/$name" "$@" -- --devices cuda:0 --dtype bfloat16 2>&1 \
    | while IFS= read -r line; do printf '%(%s)T %s\n' -1 "$line"; done > "$OUT/$name.log"  # epoch seconds a line
  rm -rf "$OUT/$name/raw" "$OUT/$name"/*.png; tar czf "$OUT/$name.tgz" -C "$OUT" "$name" && rm -rf "$OUT/$name"
}
suite() {
  pin "$1" timeout 200 python3 -m pytest -q -p no:cacheprovider -m cuda -rfE \
    --continue-on-collection-errors tests/ > "$OUT/suite_pytest.log" 2>&1
  grep -E "passed|failed|diverged" "$OUT/suite_pytest.log" | tail -12
}
greedy="--ks 0,1,2,3 --adaptive-k-max 3 --temperature 0"
t15="--ks 0 --adaptive-k-max 3 --temperature 1.5"
case ${1:?stage} in
  one) sweep 0 greedy_c1 450 $greedy --concurrencies 1 &
       sweep 1 greedy_c2_4 450 $greedy --concurrencies 2,4 ;;
  two) sweep 0 greedy_c8_32 470 $greedy --concurrencies 8,16,32 &
       sweep 1 greedy_c64_80 480 $greedy --concurrencies 64,80 ;;
  three) sweep 0 t15_c1_8 400 $t15 --concurrencies 1,2,4,8 &
         { suite 1; sweep 1 t15_c16_80 300 $t15 --concurrencies 16,32,64,80; } ;;
  four) fields=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu,clocks_event_reasons.active
         nvidia-smi --query-gpu=$fields --format=csv -lms 100 > "$OUT/clocks.csv" 2>&1 &
         logger=$!
         sweep 0 clocks_c80 220 --ks 0 --temperature 0 --concurrencies 80 --repeats 6
         kill $logger ;;
esac
wait
for f in "$OUT"/*.tgz; do echo "$f"; tar xzf "$f" -O --wildcards '*/results.md' | grep -E '^\| [0-9]+ \| MTP adaptive|^\| baseline \| 80 \| [0-9]'; done
