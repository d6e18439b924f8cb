#!/usr/bin/env bash
# The forty-seventh session's fourth call (one H200, kind nvidia-h200, torch 2.11.0+cu130, bf16; carry .whl and
# .data) on d4a4db2: issue 14's greedy cell at c = 80, call2.sh's sweep arguments (k = 0, fixed k = 3, adaptive
# k_max 3; --isolated, 24 x c prompts, 5 repeats):
#   SHAREGPT=.data/sharegpt_heldout2.json.gz bash docs/gpu/frontend_1201_fortyseventh/call4.sh
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
SECONDS=0
bash "$here/../sweep_1130_fortieth/call.sh" run greedy_c80 430 --ks 0,3 --adaptive-k-max 3 --temperature 0 \
  --concurrencies 80 --repeats 5 --prompts-factor 24
echo "total: $SECONDS s"
