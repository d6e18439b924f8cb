#!/usr/bin/env bash
# The device call behind this folder (SHAREGPT: the held-out ShareGPT JSON): where does adaptive lose at
# temperature 1.5, c = 32, on the GPU? Offline first (no HTTP frontend), then the serving cell with the step split,
# while thread_cpu.py samples every server thread's CPU time; then greedy c = 4 (adaptive against fixed k = 3).
# A second call: offline greedy at batch 4 and 16 (is adaptive's step dearer at the same k without serving?), and
# the temperature-1.5 cells at c = 64 and 80 with 5 repeats.
#   SHAREGPT=... bash docs/gpu/h100_reruns_1128/calls.sh offline t15_c32 greedy_c4     # the first call
#   SHAREGPT=... bash docs/gpu/h100_reruns_1128/calls.sh offline_greedy t15_hi          # the second
#   SHAREGPT=... bash docs/gpu/h100_reruns_1128/calls.sh greedy_hi                      # the third
set -uo pipefail
: "${SHAREGPT:?the ShareGPT JSON (held-out split) to sample prompts from}"
here=docs/gpu/h100_reruns_1128
STAGES=none bash scripts/gpu_check.sh > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
for stage in "$@"; do
  case $stage in
    offline) timeout 100 python3 scripts/bench_offline.py --devices cuda:0 --dtype bfloat16 --ks 0 --adaptive-k-max 3 \
               --batch-sizes 32 64 --repeats 5 --temperature 1.5 --max-tokens 256 --out $OUT/offline_t15.json 2>&1 \
               | grep '^|' ;;
    t15_c32) python3 $here/thread_cpu.py $OUT/threads_t15_c32.jsonl & sampler=$!
             SWEEP_ARGS="--concurrencies 32 --repeats 5" timeout 280 bash docs/gpu/isolated_1127/calls.sh t15_long
             kill $sampler; gzip $OUT/threads_t15_c32.jsonl ;;
    offline_greedy) timeout 120 python3 scripts/bench_offline.py --devices cuda:0 --dtype bfloat16 --ks 0 3 \
                      --adaptive-k-max 3 --batch-sizes 4 16 --repeats 5 --max-tokens 256 --out $OUT/offline_greedy.json \
                      2>&1 | grep '^|' ;;
    # The isolated sweep's temperature-1.5 cells at c = 64 and 80, 5 repeats (calls.sh t15_long's 290 s would cut them).
    t15_hi) timeout 420 python3 scripts/bench_mtp_sweep.py --isolated --adaptive-k-max 3 --ks 0 --temperature 1.5 \
              --concurrencies 64,80 --repeats 5 --min-prompts 48 --prompts-factor 24 --dataset-name sharegpt \
              --dataset-path $SHAREGPT --sharegpt-split held-out --ignore-eos --sharegpt-max-total-len 2000 \
              --disable-tqdm --out-dir $OUT/sweep_t15_hi -- --devices cuda:0 --dtype bfloat16 > $OUT/sweep_t15_hi.log 2>&1
            grep -E "healthy|error" $OUT/sweep_t15_hi.log | head -20; cat $OUT/sweep_t15_hi/results.md
            rm -rf $OUT/sweep_t15_hi/raw; tar czf $OUT/sweep_t15_hi.tgz -C $OUT sweep_t15_hi && rm -rf $OUT/sweep_t15_hi ;;
    # Greedy at c = 8..80, fixed k = 2 left out (never the GPU's best), 8 x c prompts a cell: what fits the budget left.
    greedy_hi) timeout 270 python3 scripts/bench_mtp_sweep.py --isolated --adaptive-k-max 3 --ks 0,3 --temperature 0 \
                 --concurrencies 8,16,32,64,80 --repeats 3 --min-prompts 48 --prompts-factor 8 --dataset-name sharegpt \
                 --dataset-path $SHAREGPT --sharegpt-split held-out --ignore-eos --sharegpt-max-total-len 2000 \
                 --disable-tqdm --out-dir $OUT/sweep_greedy_hi -- --devices cuda:0 --dtype bfloat16 \
                 > $OUT/sweep_greedy_hi.log 2>&1
               python3 scripts/bench_mtp_sweep.py --replot --out-dir $OUT/sweep_greedy_hi > /dev/null 2>&1
               grep -E "error" $OUT/sweep_greedy_hi.log | head; cat $OUT/sweep_greedy_hi/results.md
               rm -rf $OUT/sweep_greedy_hi/raw; tar czf $OUT/sweep_greedy_hi.tgz -C $OUT sweep_greedy_hi && rm -rf $OUT/sweep_greedy_hi ;;
    greedy_c4) SWEEP_ARGS="--ks 0,3 --concurrencies 4" timeout 260 bash docs/gpu/isolated_1127/calls.sh greedy_long_a ;;
  esac
done
