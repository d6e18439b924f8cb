#!/usr/bin/env bash
# 2026-11-30, thirty-eighth session, call 2 on the H200 of call 1 (carry .whl): on the tree's kernels, the whole
# attention table (B = 1, 16, 64, 128 at k = 0..3, copy bandwidth measured in the same run), then the GPU test
# suite and the bf16 divergence rate of greedy MTP against k = 0 (scripts/gpu_check.sh's test and rate stages).
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp/mtpserve-gpu}
mkdir -p "$out/table"
STAGES=none bash scripts/gpu_check.sh > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
export PYTHONPATH=/tmp/site
timeout 240 python3 scripts/bench_mla_attention.py --batches 1,16,64,128 --ks 0,1,2,3 --out "$out/table" \
  > "$out/table/bench.log" 2>&1
status=$?
tail -22 "$out/table/bench.log"
STAGES="test rate" bash scripts/gpu_check.sh || status=1
(cd "$out" && tar czf table.tgz table && rm -rf table)
exit $status
