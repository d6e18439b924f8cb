#!/usr/bin/env bash
# The forty-fifth session's serving calls (one H200, kind nvidia-h200, torch 2.11.0+cu130, bf16; carry .whl and
# .data) on main's engine (4b3c070's cost model): issue 14's GPU serving sweep with the fortieth session's build,
# client and server arguments (docs/gpu/sweep_1130_fortieth/call.sh: held-out ShareGPT, 128 output tokens,
# --isolated, 12 x c prompts and at least 72, 3 repeats, a fresh server per method and repeat), each stage one sweep:
#   t15         temperature 1.5 at c = 1..80, k = 0 and adaptive (k_max 3); then temperature 1.5 offline at batch
#               1, 8, 32 and 64, k = 0 and adaptive, 30 interleaved repeats
#   greedy_low  greedy at c = 1, 2, 4 and 8, k = 0, fixed k = 3 (the best fixed k there in the last sweeps) and adaptive
#   greedy_high greedy at c = 16, 32, 64 and 80, the same methods
#   greedy_long greedy at c = 64 and 80 again (greedy_high's misses), 24 x c prompts and 5 repeats
#   SHAREGPT=<held-out ShareGPT JSON cut to two turns, gzipped> bash docs/gpu/confirm_1201_fortyfifth/sweep.sh STAGE
set -uo pipefail
sweep() { bash "$(dirname "$0")/../sweep_1130_fortieth/call.sh" run "$@" --adaptive-k-max 3; }
case ${1:?stage} in
  t15)
    sweep t15_c1_80 470 --ks 0 --temperature 1.5 --concurrencies 1,2,4,8,16,32,64,80
    cd "$(dirname "$0")/../../.." && PYTHONPATH=/tmp/site timeout 100 python3 scripts/bench_offline.py \
      --devices cuda:0 --dtype bfloat16 --adaptive-k-max 3 --ks 0 --temperature 1.5 --repeats 30 \
      --batch-sizes 1 8 32 64 --out "$OUT/offline_t15_r30.json" 2>&1 | grep -E '^\| (k=0|adapt)' | cut -d'|' -f2-8 ;;
  greedy_low) sweep greedy_c1_8 560 --ks 0,3 --temperature 0 --concurrencies 1,2,4,8 ;;
  greedy_high) sweep greedy_c16_80 560 --ks 0,3 --temperature 0 --concurrencies 16,32,64,80 ;;
  greedy_long) sweep greedy_c64_80_long 540 --ks 0,3 --temperature 0 --concurrencies 64,80 --repeats 5 \
                 --prompts-factor 24 ;;
esac
