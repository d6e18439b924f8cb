#!/usr/bin/env bash
# The forty-third session's serving call (one H200, kind nvidia-h200, torch 2.11.0+cu130, bf16; carry .whl and .data)
# on the engine of 50b29c1 (the forty-second session's, unchanged since): greedy at c = 32, 64 and 80 with k = 0,
# fixed k = 1, 2, 3 and adaptive (k_max 3), 12 x c prompts, 3 repeats, a fresh server per method and repeat
# (docs/gpu/sweep_1130_fortieth/call.sh's build, client and server arguments); a second call, `small`: greedy at c = 8
# and 16 with k = 0, fixed k = 2, 3 and adaptive, 24 x c prompts (at least 144) and 5 repeats, as the forty-first
# session's `small` stage (its shorter cells had read 0.93 there):
#   SHAREGPT=<held-out ShareGPT JSON cut to two turns, gzipped> bash docs/gpu/sweep_1201_fortythird/call.sh [small]
set -uo pipefail
sweep() { bash "$(dirname "$0")/../sweep_1130_fortieth/call.sh" run "$@"; }
case ${1:-large} in
  large) sweep greedy_c32_80 480 --ks 0,1,2,3 --adaptive-k-max 3 --temperature 0 --concurrencies 32,64,80 ;;
  small) sweep greedy_c8_16 360 --ks 0,2,3 --adaptive-k-max 3 --temperature 0 --concurrencies 8,16 --repeats 5 \
           --min-prompts 144 --prompts-factor 24 ;;
esac
