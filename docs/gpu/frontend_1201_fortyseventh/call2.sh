#!/usr/bin/env bash
# The forty-seventh session's second call (one H200, kind nvidia-h200, torch 2.11.0+cu130, bf16; carry .whl and
# .data), on the change that tokenizes text of at most INLINE_CHARS on the event loop (and longer text on a thread
# with the GIL released): call1.sh's traced runs of main's tokenizing (base) and the build's own (product), then
# issue 14's greedy cell at c = 64 with the fortieth session's sweep arguments (k = 0, fixed k = 3, adaptive k_max 3;
# --isolated, 24 x c prompts, 5 repeats):
#   SHAREGPT=.data/sharegpt_heldout2.json.gz bash docs/gpu/frontend_1201_fortyseventh/call2.sh
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
SECONDS=0
RUNS=2 bash "$here/call1.sh" "base product"
echo "traced runs: $SECONDS s"
bash "$here/../sweep_1130_fortieth/call.sh" run greedy_c64 420 --ks 0,3 --adaptive-k-max 3 --temperature 0 \
  --concurrencies 64 --repeats 5 --prompts-factor 24
echo "total: $SECONDS s"
