#!/usr/bin/env bash
# The forty-fourth session's serving calls (one H200, kind nvidia-h200, torch 2.11.0+cu130, bf16; carry .whl and
# .data) on the engine of 50b29c1 (unchanged since): greedy at c = 1, 2 and 4, 24 x c prompts (at least 144),
# 3 repeats, a fresh server per method and repeat, as the fortieth session's first call
# (docs/gpu/sweep_1130_fortieth/call.sh's build, client and server arguments), each stage one sweep:
#   all   k = 0, fixed k = 1, 2, 3 and adaptive (k_max 3). The call's limit (600 s) cut its last two cells
#         (adaptive's and k = 3's third repeats).
#   best  (the same machine, warm) k = 0, fixed k = 3 (the best fixed k at c = 1, 2, 4 in `all`) and adaptive.
#   SHAREGPT=<held-out ShareGPT JSON cut to two turns, gzipped> bash docs/gpu/sweep_1201_fortyfourth/call.sh [best]
set -uo pipefail
sweep() { bash "$(dirname "$0")/../sweep_1130_fortieth/call.sh" run "$@" --adaptive-k-max 3 --temperature 0 \
            --concurrencies 1,2,4 --min-prompts 144 --prompts-factor 24; }
case ${1:-all} in
  all) sweep greedy_c1_4 500 --ks 0,1,2,3 ;;
  best) sweep greedy_c1_4_best 420 --ks 0,3 ;;
esac
