#!/usr/bin/env bash
# Why B = 128 at k = 2 is the slowest cell (code of 488c5e4; device tool, carry .whl): the benchmark with sustained
# replay (SM clock, power) and eager kernel times, then Nsight Compute on one fused launch at k = 0, 2 and 3.
# Output: table.txt, ncu_b128_k*.txt.
set -uo pipefail
out=${OUT:-/tmp/x}
STAGES=none bash scripts/gpu_check.sh > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
export PYTHONPATH=/tmp/site PATH=/usr/local/cuda/bin:$PATH
timeout 200 python3 scripts/bench_mla_attention.py --batches 128 --reps 20 --sustain 2 --breakdown --out /tmp/bd > "$out/table.txt" 2>&1
grep -v "^$" "$out/table.txt" | tail -24
for k in 0 2 3; do
  timeout 120 ncu --clock-control none --kernel-name regex:mla_attention_wgmma --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section WarpStateStats \
    --section SchedulerStats --section LaunchStats \
    --metrics sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_active.min,smsp__inst_executed.sum,dram__bytes_read.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active \
    python3 scripts/bench_mla_attention.py --batches 128 --ks $k --reps 2 --out /tmp/prof > "$out/ncu_b128_k$k.txt" 2>&1
  echo "== B=128 k=$k"
  grep -E "Duration|SM Frequency|DRAM Throughput|Compute \(SM\)|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Mem Busy|sm__cycles_active|smsp__inst_executed|dram__bytes_read|gmma" "$out/ncu_b128_k$k.txt" | head -16
done
