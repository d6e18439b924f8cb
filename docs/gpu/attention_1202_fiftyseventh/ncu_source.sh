#!/usr/bin/env bash
# Nsight Compute's per-instruction stall samples (SASS) of the split combine kernel at B = 1 (32 splits), k = 0,
# context 8192, with the caches left as the graph replay leaves them (--cache-control none): its sixth launch.
# The tree's mla_attention.cu is touched first so that the lent machine's incremental build compiles it.
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp}
touch cpp/kernels/cuda/mla_attention.cu
STAGES=none OUT=$out/build bash scripts/gpu_check.sh > "$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
export PYTHONPATH=/tmp/site PATH=/usr/local/cuda/bin:$PATH
timeout 150 ncu --cache-control none --kernel-name regex:mla_combine_kernel --launch-skip 5 --launch-count 1 --set full \
  --page source --print-source sass python3 scripts/bench_mla_attention.py --batches 1 --ks 0 --reps 3 --out /tmp/ncu \
  > "$out/ncu_source_b1.txt" 2>&1
timeout 100 ncu --cache-control none --kernel-name regex:mla_combine_kernel --launch-skip 5 --launch-count 1 \
  --section SpeedOfLight --section LaunchStats --section WarpStateStats --section SchedulerStats \
  python3 scripts/bench_mla_attention.py --batches 1 --ks 0 --reps 3 --out /tmp/ncu > "$out/ncu_details_b1.txt" 2>&1
grep -E "Grid Size|Block Size|Duration|Elapsed Cycles|SM Active|Warp Cycles Per Issued" "$out/ncu_details_b1.txt"
wc -l "$out/ncu_source_b1.txt"; head -c 3000 "$out/ncu_source_b1.txt"
