#!/usr/bin/env bash
# The forty-seventh session's third call (one H200, kind nvidia-h200, torch 2.11.0+cu130; carry .whl and .data) on
# d4a4db2: the GPU test suite, then call1.sh's traced runs of main's old tokenizing (base) and the build's own
# (product) at c = 16, where the event loop is not saturated (384 prompts, two bench runs a server):
#   SHAREGPT=.data/sharegpt_heldout2.json.gz bash docs/gpu/frontend_1201_fortyseventh/call3.sh
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
SECONDS=0
STAGES=test bash scripts/gpu_check.sh > "$OUT/check.log" 2>&1
echo "build and suite: $SECONDS s"; grep -E "passed|failed|diverged" "$OUT/check.log" | tail -8
NO_BUILD=1 CONC=16 NUM_PROMPTS=384 RUNS=2 bash "$here/call1.sh" "base product"
echo "total: $SECONDS s"
