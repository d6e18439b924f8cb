#!/usr/bin/env bash
# Nsight Compute on the split combine kernel's first launch at B = 1 (32 splits) and B = 16 (8 splits), k = 0,
# context 8192, bf16 (the tree's build in place on the lent H200).
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp}
export PYTHONPATH=/tmp/site PATH=/usr/local/cuda/bin:$PATH
for b in 1 16; do
  timeout 120 ncu --kernel-name regex:mla_combine_kernel --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats \
    --section Occupancy --section SchedulerStats --section SourceCounters \
    python3 scripts/bench_mla_attention.py --batches $b --ks 0 --reps 3 --out /tmp/ncu_$b > "$out/ncu_combine_b$b.txt" 2>&1
  grep -E "Duration|Memory Throughput|L2 Hit|Achieved Occupancy|Registers Per|Block Size|Grid Size|Stall|Warp Cycles Per Issued|Issued Warp" "$out/ncu_combine_b$b.txt" | head -24
done
