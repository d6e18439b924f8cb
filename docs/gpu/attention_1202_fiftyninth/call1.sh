#!/usr/bin/env bash
# 2026-12-02, fifty-ninth session, on one H200 (carry .whl): the tree of 28db75d (warpgroup 1 scores late where the
# launch's blocks fill half the SMs) through the GPU suite, compute-sanitizer and the `profile` stage of
# scripts/gpu_check.sh, then the batch-invariance attention tests, then the kernel table at B = 8 and 16, k = 0..3,
# with each call's kernels (--breakdown).
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp}
STAGES="test sanitize profile" OUT=$out/suite bash scripts/gpu_check.sh > "$out/suite.log" 2>&1
echo "gpu_check status $?"
cat "$out/suite.log"
export PYTHONPATH=/tmp/site PATH=/usr/local/cuda/bin:$PATH
timeout 120 python3 -m pytest -q -p no:cacheprovider -rfE tests/test_batch_invariance.py -k attention 2>&1 | tail -3
timeout 120 python3 scripts/bench_mla_attention.py --batches 8,16 --ks 0,1,2,3 --reps 30 --breakdown --out "$out" 2>&1 \
  | tail -12
