#!/usr/bin/env bash
# Kernel time split (--breakdown: attention kernel vs split-KV combine) and Nsight Compute sections of one fused
# launch at B = 16 and 64, k = 0 and 3, on the code of 0623e11 (device tool, carry .whl). Output: breakdown.txt, ncu.tgz.
set -uo pipefail
out=${OUT:-/tmp/x}
STAGES=none bash scripts/gpu_check.sh > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
export PYTHONPATH=/tmp/site PATH=/usr/local/cuda/bin:$PATH
timeout 150 python3 scripts/bench_mla_attention.py --batches 16,64 --breakdown --out /tmp/bd > "$out/breakdown.txt" 2>&1
grep -v "^$" "$out/breakdown.txt" | tail -30
for bk in "16 0" "16 3" "64 0" "64 3"; do
  set -- $bk
  timeout 120 ncu --clock-control none --kernel-name regex:mla_attention_wgmma --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section WarpStateStats \
    --section SchedulerStats --section LaunchStats --section Occupancy \
    python3 scripts/bench_mla_attention.py --batches $1 --ks $2 --reps 2 --out /tmp/prof > "$out/ncu_b$1_k$2.txt" 2>&1
  echo "== B=$1 k=$2"
  grep -E "Duration|DRAM Throughput|Compute \(SM\)|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|L2 Hit|Mem Busy|Max Bandwidth|Registers Per" "$out/ncu_b$1_k$2.txt" | head -14
done
cd "$out" && tar czf ncu.tgz ncu_b*.txt && rm ncu_b*.txt
