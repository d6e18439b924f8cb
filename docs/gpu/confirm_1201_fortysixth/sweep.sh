#!/usr/bin/env bash
# The forty-sixth session's serving calls (one H200, kind nvidia-h200, torch 2.11.0+cu130, bf16; carry .whl and
# .data) on main's engine (5255ebd), with the fortieth session's build, client and server arguments
# (docs/gpu/sweep_1130_fortieth/call.sh: held-out ShareGPT, 128 output tokens, --isolated, a fresh server per method
# and repeat), each stage one sweep:
#   t15       temperature 1.5 at c = 1..80, k = 0 and adaptive (k_max 3), 12 x c prompts (at least 72), 3 repeats
#   greedy    greedy at c = 1..32, k = 0, fixed k = 3 (the best fixed k there in the last sweeps) and adaptive
#   greedy_long greedy at c = 16, 64 and 80, the same methods, 24 x c prompts and 5 repeats (the forty-fifth
#             session's cells at 12 x c prompts at c = 64 and 80 read the HTTP frontend's hold on requests there;
#             c = 16 missed in this session's greedy stage)
#   SHAREGPT=<held-out ShareGPT JSON cut to two turns, gzipped> bash docs/gpu/confirm_1201_fortysixth/sweep.sh STAGE
set -uo pipefail
sweep() { bash "$(dirname "$0")/../sweep_1130_fortieth/call.sh" run "$@" --adaptive-k-max 3; }
case ${1:?stage} in
  t15) sweep t15_c1_80 470 --ks 0 --temperature 1.5 --concurrencies 1,2,4,8,16,32,64,80 ;;
  greedy) sweep greedy_c1_32 540 --ks 0,3 --temperature 0 --concurrencies 1,2,4,8,16,32 ;;
  greedy_long) sweep greedy_c16_64_80_long 540 --ks 0,3 --temperature 0 --concurrencies 16,64,80 --repeats 5 \
                 --prompts-factor 24 ;;
esac
