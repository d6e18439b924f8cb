#!/usr/bin/env bash
# 2026-12-02, fifty-ninth session, on one H200 (carry .whl): the kernel table of the final tree (f166bde) at B = 1 and
# 128, k = 0..3 (context 8192), which call 4 did not run, twice.
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp}
STAGES=none OUT=$out/build bash scripts/gpu_check.sh > "$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
export PYTHONPATH=/tmp/site PATH=/usr/local/cuda/bin:$PATH
for round in 1 2; do
  mkdir -p "$out/round$round"
  timeout 150 python3 scripts/bench_mla_attention.py --batches 1,128 --ks 0,1,2,3 --reps 30 --out "$out/round$round" 2>&1 \
    | tail -9
done
