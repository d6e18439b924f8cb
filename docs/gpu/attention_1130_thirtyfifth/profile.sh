#!/usr/bin/env bash
# Nsight Compute on the fused call at B = 128 (k = 0, 3) and 16 (k = 0): the tree (A) and the compute variant
# (make_variants.sh first), with the tensor pipe's activity and the stall reasons per issued instruction. One device
# call (carry .whl):  bash docs/gpu/attention_1130_thirtyfifth/profile.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp/prof}
source docs/gpu/attention_1130_thirtyfifth/build_two.sh compute
ncu --query-metrics 2>/dev/null | grep -iE "pipe_tensor|gmma" > "$out/tensor_metrics.txt"
metrics=$(grep -oE "^sm__pipe_tensor[a-z_]*cycles_active|^sm__inst_executed_pipe_tensor[a-z_]*" "$out/tensor_metrics.txt" | sort -u | sed 's/$/.avg.pct_of_peak_sustained_active/' | paste -sd, -)
stalls=$(ncu --query-metrics 2>/dev/null | grep -oE "^smsp__average_warps_issue_stalled_[a-z_]*_per_issue_active" | sort -u | sed 's/$/.ratio/' | paste -sd, -)
echo "metrics: $metrics"
for v in A compute; do
  cp /tmp/$v.so "$so"
  for shape in "128 3" "128 0" "16 0"; do
    set -- $shape
    timeout 150 ncu --clock-control none --kernel-name regex:mla_attention_wgmma --launch-skip 3 --launch-count 1 \
      --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
      --metrics "sm__cycles_elapsed.avg.per_second,$metrics,$stalls" \
      python3 scripts/bench_mla_attention.py --batches $1 --ks $2 --reps 3 --out /tmp/p > "$out/ncu_${v}_b$1_k$2.txt" 2>&1
    grep -q Duration "$out/ncu_${v}_b$1_k$2.txt" || { tail -5 "$out/ncu_${v}_b$1_k$2.txt"; timeout 150 ncu --clock-control none \
      --kernel-name regex:mla_attention_wgmma --launch-skip 3 --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis \
      --section WarpStateStats --section SchedulerStats python3 scripts/bench_mla_attention.py --batches $1 --ks $2 --reps 3 \
      --out /tmp/p > "$out/ncu_${v}_b$1_k$2.txt" 2>&1; }
    echo "== $v B=$1 k=$2"
    grep -E "Duration|SM Frequency|Compute \(SM\) Throughput|Memory Throughput|pipe_tensor|Issue Slots Busy|No Eligible|cycles_elapsed" "$out/ncu_${v}_b$1_k$2.txt" | head -24
  done
done
cp /tmp/A.so "$so"
