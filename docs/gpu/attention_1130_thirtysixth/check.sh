#!/usr/bin/env bash
# One H200 (carry .whl; FlashMLA's source as .ab/flashmla_src.tgz, see docs/gpu/flashmla_1130_thirtyfourth/call.sh):
# the tree's kernel under its attention tests and compute-sanitizer memcheck, timed twice beside FlashMLA's dense
# decode on the same calls, then Nsight Compute on one fused call (B = 128, k = 3).
#   bash docs/gpu/attention_1130_thirtysixth/check.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp/check}
mkdir -p "$out"
STAGES=none bash scripts/gpu_check.sh > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
export PYTHONPATH=/tmp/site PATH=/usr/local/cuda/bin:$PATH CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)
SANITIZE=1 bash docs/gpu/attention_1130_thirtysixth/tests.sh > "$out/tests.log" 2>&1
echo "tests: $(grep -E 'passed|failed|ERROR SUMMARY' "$out/tests.log" | tr '\n' ' ')"
mkdir -p /tmp/flashmla && tar xzf .ab/flashmla_src.tgz -C /tmp/flashmla
(cd scripts && python3 -c "import flashmla_reference as f; f.load('/tmp/flashmla')") > "$out/flashmla_build.log" 2>&1 \
  || { tail -30 "$out/flashmla_build.log"; exit 1; }
for run in 1 2; do
  echo "== run $run"
  timeout 150 python3 scripts/bench_mla_attention.py --flashmla /tmp/flashmla --reps 30 --batches ${BATCHES:-16,64,128} \
    --ks ${KS:-0,3} --out /tmp/fm_$run > /tmp/fm_run.txt 2>&1
  grep -E "^\| 8192|copy bandwidth" /tmp/fm_run.txt
done | tee "$out/flashmla.txt"
stalls=$(ncu --query-metrics 2>/dev/null | grep -oE "^smsp__average_warps_issue_stalled_[a-z_]*_per_issue_active" | sort -u \
  | sed 's/$/.ratio/' | paste -sd, -)
timeout 150 ncu --clock-control none --kernel-name regex:mla_attention_wgmma --launch-skip 3 --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
  --metrics "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg.per_second,$stalls" \
  python3 scripts/bench_mla_attention.py --batches 128 --ks 3 --reps 3 --out /tmp/p > "$out/ncu_b128_k3.txt" 2>&1
grep -E "Duration|SM Frequency|pipe_tensor|Issue Slots Busy|No Eligible|stalled_(long|barrier|wait|math|short|gmma|dispatch|mio|lg|membar|sleeping|branch|selected|not_selected|no_inst|tex|drain|imc|misc)" \
  "$out/ncu_b128_k3.txt" | head -40
