#!/usr/bin/env bash
# The three serving-sweep calls of 2026-11-29's twenty-first session, on the code of the graphed fill (e647e91),
# one after another on one warm lent H200 (SHAREGPT: the held-out ShareGPT JSON cut to two turns a record):
#   greedy, c = 1, 2, 4     -> greedy_c1_4.tgz
#   greedy, c = 8, 16, 32   -> greedy_c8_32.tgz
#   temperature 1.5, c = 32, 64 (k = 0 and adaptive) -> t15_c32_64.tgz
# Not run yet, the cells the session's device time did not reach (to finish issue 14's GPU sweep on one code version;
# run them back to back on a warm machine, each well inside a call's 600 s):
#   greedy_high   greedy, c = 64, 80: k = 0, fixed k = 3 and adaptive, 5 repeats (k = 2 was never the best fixed k
#                 there on the GPU)
#   t15_rest      temperature 1.5, c = 1, 2, 4, 8, 16, 80: k = 0 and adaptive, 3 repeats
#   prompt_step   where a prompt step's extra 1.4 ms under MTP goes (scripts/profile_prompt_step.py, k = 0 and 3)
set -uo pipefail
: "${SHAREGPT:?the ShareGPT JSON (held-out split) to sample prompts from}"
case ${1:?greedy_small, greedy_mid, t15, greedy_high, t15_rest or prompt_step} in
  greedy_small) SWEEP_ARGS="--concurrencies 1,2,4" bash docs/gpu/isolated_1127/calls.sh greedy_long_a ;;
  greedy_mid) SWEEP_ARGS="--concurrencies 8,16,32" bash docs/gpu/isolated_1127/calls.sh greedy_long_b ;;
  greedy_high) SWEEP_ARGS="--ks 0,3 --concurrencies 64,80 --repeats 5" bash docs/gpu/isolated_1127/calls.sh greedy_long_b ;;
  t15_rest) SWEEP_ARGS="--concurrencies 1,2,4,8,16,80" bash docs/gpu/isolated_1127/calls.sh t15_long_small ;;
  prompt_step)
    STAGES=none bash scripts/gpu_check.sh > $OUT/build.log 2>&1
    PYTHONPATH=/tmp/site timeout 240 python3 scripts/profile_prompt_step.py --devices cuda:0 --ks 0 3 \
      --out $OUT/prompt_step.md 2>&1 | grep -v Loading ;;
  t15)
    STAGES=none bash scripts/gpu_check.sh > $OUT/build.log 2>&1
    PYTHONPATH=/tmp/site timeout 195 python3 scripts/bench_mtp_sweep.py --isolated --ks 0 --adaptive-k-max 3 \
      --concurrencies 32,64 --repeats 3 --min-prompts 144 --prompts-factor 24 --dataset-name sharegpt \
      --dataset-path $SHAREGPT --sharegpt-split held-out --ignore-eos --sharegpt-max-total-len 2000 --disable-tqdm \
      --temperature 1.5 --out-dir $OUT/t15 -- --devices cuda:0 --dtype bfloat16 > $OUT/t15.log 2>&1
    rm -rf $OUT/t15/raw; tar czf $OUT/t15.tgz -C $OUT t15 && rm -rf $OUT/t15 ;;
esac
