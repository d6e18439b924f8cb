#!/usr/bin/env bash
# The forty-first session's device calls (one H200, kind nvidia-h200, torch 2.11.0+cu130, bf16; carry .whl and .data)
# on the engine of a6f3024 (d8b1ca0): what the fortieth session's sweep left unmeasured on that engine. Each stage is
# one sweep of docs/gpu/sweep_1130_fortieth/call.sh's (its build, client and server arguments: a cell has 12 x c
# prompts, at least 72, 3 repeats, a fresh server per method and repeat), with these arguments after its defaults:
#   SHAREGPT=<held-out ShareGPT JSON cut to two turns, gzipped> bash docs/gpu/sweep_1201_fortyfirst/call.sh STAGE
#   t15:     temperature 1.5 at c = 1, 4, 16, 32, 64, 80, k = 0 and adaptive (c = 2 and 8 ran on a6f3024 last session)
#   greedy:  greedy at c = 8, 16, 32, 64, 80 with every method, fixed k = 1 and 2 included
#   small:   greedy at c = 8 and 16 again (where greedy missed 0.95 of fixed k = 3) with longer cells, 24 x c
#            prompts (at least 144), and 5 repeats: k = 0, fixed k = 2 and 3, adaptive
#   t15_c80: temperature 1.5 at c = 80 again (0.932 of k = 0 in the t15 call), 24 x c prompts and 5 repeats
# The calls ran from a copy of that file's sweep function here, which also saved environment.txt as
# environment_STAGE.txt (the files beside this one).
set -uo pipefail
sweep() { bash "$(dirname "$0")/../sweep_1130_fortieth/call.sh" run "$@"; }
case ${1:?stage} in
  t15) sweep t15_c1_80 400 --ks 0 --adaptive-k-max 3 --temperature 1.5 --concurrencies 1,4,16,32,64,80 ;;
  greedy) sweep greedy_c8_80 560 --ks 0,1,2,3 --adaptive-k-max 3 --temperature 0 --concurrencies 8,16,32,64,80 ;;
  small) sweep greedy_c8_16 480 --ks 0,2,3 --adaptive-k-max 3 --temperature 0 --concurrencies 8,16 --repeats 5 \
           --min-prompts 144 --prompts-factor 24 ;;
  t15_c80) sweep t15_c80 300 --ks 0 --adaptive-k-max 3 --temperature 1.5 --concurrencies 80 --repeats 5 \
             --prompts-factor 24 ;;
esac
