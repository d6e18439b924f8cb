#!/usr/bin/env bash
# 2026-12-02, fifty-eighth session, on one H200 (carry .whl): Nsight Compute's stall samples of the Hopper attention
# kernel, per SASS instruction (scripts/ncu_ledger.py), for one fused call each at B = 128, k = 3 and B = 16, k = 0 (context
# 8192, the graph replay's caches: --cache-control none), and the SASS source page beside them.
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp}
touch cpp/kernels/cuda/mla_attention_wgmma.cu
STAGES=none OUT=$out/build bash scripts/gpu_check.sh > "$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
export PYTHONPATH=/tmp/site PATH=/usr/local/cuda/bin:$PATH
ncu --version | tail -1
for case in "128 3" "16 0"; do
  set -- $case
  rep=$out/attention_b$1_k$2
  timeout 200 ncu --cache-control none --kernel-name regex:mla_attention_wgmma_kernel --launch-skip 5 --launch-count 1 \
    --section SourceCounters --section WarpStateStats --section SpeedOfLight --section LaunchStats --import-source no \
    -o "$rep" python3 scripts/bench_mla_attention.py --batches $1 --ks $2 --reps 3 --out /tmp/ncu > "$rep.log" 2>&1
  tail -3 "$rep.log"
  python3 scripts/ncu_ledger.py "$rep.ncu-rep" mla_attention > "$rep.ledger.txt" 2>&1
  head -60 "$rep.ledger.txt"
  ncu --import "$rep.ncu-rep" --page details > "$rep.details.txt" 2>&1
  ncu --import "$rep.ncu-rep" --page source --print-source sass --csv 2>&1 | gzip > "$rep.source.csv.gz"
done
# The kernel table at B = 16, 64 and 128 on the same machine, for what the stalls cost.
timeout 150 python3 scripts/bench_mla_attention.py --batches 16,64,128 --ks 0,3 --reps 30 --breakdown --out "$out" 2>&1 | tail -12
