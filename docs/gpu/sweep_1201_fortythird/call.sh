#!/usr/bin/env bash
# The forty-third session's serving call (one H200, kind nvidia-h200, torch 2.11.0+cu130, bf16; carry .whl and .data)
# on the engine of 50b29c1 (the forty-second session's, unchanged since): greedy at c = 32, 64 and 80 with k = 0,
# fixed k = 1, 2, 3 and adaptive (k_max 3), 12 x c prompts, 3 repeats, a fresh server per method and repeat
# (docs/gpu/sweep_1130_fortieth/call.sh's build, client and server arguments):
#   SHAREGPT=<held-out ShareGPT JSON cut to two turns, gzipped> bash docs/gpu/sweep_1201_fortythird/call.sh
set -uo pipefail
bash "$(dirname "$0")/../sweep_1130_fortieth/call.sh" run greedy_c32_80 480 --ks 0,1,2,3 --adaptive-k-max 3 \
  --temperature 0 --concurrencies 32,64,80
