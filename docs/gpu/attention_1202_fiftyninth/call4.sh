#!/usr/bin/env bash
# 2026-12-02, fifty-ninth session, on one H200 (carry .whl): the final tree (thread 0's share of Q copied before the
# first tiles') through the GPU suite and compute-sanitizer (scripts/gpu_check.sh's test and sanitize stages), the
# batch-invariance attention tests, memcheck over test_cuda_attention.py with its long-context split cases, then
# Nsight Compute's stall samples per SASS instruction at B = 16, k = 0, and the kernel table at B = 16 and 64.
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp}
STAGES="test sanitize" OUT=$out/suite bash scripts/gpu_check.sh > "$out/suite.log" 2>&1
echo "gpu_check status $? (the test stage counts the 3 CPU-only files that do not collect here)"
tail -8 "$out/suite.log"
export PYTHONPATH=/tmp/site PATH=/usr/local/cuda/bin:$PATH
timeout 120 python3 -m pytest -q -p no:cacheprovider -rfE tests/test_batch_invariance.py -k attention 2>&1 | tail -2
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m pytest -q -p no:cacheprovider -x \
  tests/test_cuda_attention.py -k "not long or (long_context and h16)" 2>&1 | grep -E "ERROR SUMMARY|passed|failed" | tail -3
rep=$out/attention_b16_k0
timeout 100 ncu --cache-control none --kernel-name regex:mla_attention_wgmma_kernel --launch-skip 5 --launch-count 1 \
  --section SourceCounters --section WarpStateStats --section SpeedOfLight --import-source no \
  -o "$rep" python3 scripts/bench_mla_attention.py --batches 16 --ks 0 --reps 3 --out /tmp/ncu > "$rep.log" 2>&1
python3 scripts/ncu_ledger.py "$rep.ncu-rep" mla_attention > "$rep.ledger.txt" 2>&1
head -24 "$rep.ledger.txt"
rm -f "$rep.ncu-rep"
timeout 120 python3 scripts/bench_mla_attention.py --batches 16,64 --ks 0,1,2,3 --reps 30 --out "$out" 2>&1 | tail -10
