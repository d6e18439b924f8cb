#!/usr/bin/env bash
# 2026-12-02, fifty-ninth session, on one H200 (carry .whl and .ab). The tree (A: 28db75d with prefetch_head.patch: each
# block asks for its tensor map's descriptor and its share of its block-table row at its first instruction) against
# main's kernel and copy helpers (.ab/main: `git show 28db75d:<path>`): scripts/gpu_ab.sh builds both, dumps each one's
# outputs on fixed inputs, runs the attention tests against A, then times A B three times at B = 1, 16 and 64, k = 0 and
# 3 (context 8192). Then Nsight Compute's stall samples of A's kernel per SASS instruction (scripts/ncu_ledger.py) at B
# = 16, k = 0 and 3.
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp/mtpserve-ab}
VARIANTS=.ab/main PYTEST_VERSIONS=A ROUNDS=3 bash docs/gpu/attention_1202_fiftyninth/ab.sh
export PYTHONPATH=/tmp/site PATH=/usr/local/cuda/bin:$PATH
for k in 0 3; do
  rep=$out/attention_b16_k$k
  timeout 100 ncu --cache-control none --kernel-name regex:mla_attention_wgmma_kernel --launch-skip 5 --launch-count 1 \
    --section SourceCounters --section WarpStateStats --section SpeedOfLight --import-source no \
    -o "$rep" python3 scripts/bench_mla_attention.py --batches 16 --ks $k --reps 3 --out /tmp/ncu > "$rep.log" 2>&1
  python3 scripts/ncu_ledger.py "$rep.ncu-rep" mla_attention > "$rep.ledger.txt" 2>&1
  head -40 "$rep.ledger.txt"
  ncu --import "$rep.ncu-rep" --page source --print-source sass --csv 2>&1 | gzip > "$rep.source.csv.gz"
done
