#!/usr/bin/env bash
# Our fused verify attention beside FlashMLA's dense decode on one lent H200, in one device call (carry .whl).
# FlashMLA (deepseek-ai/FlashMLA 9241ae3, its csrc without the sparse and sm100 kernels) with CUTLASS 147f567's
# include/ in csrc/cutlass comes as .ab/flashmla_src.tgz in the working tree: the GPU machine reaches nothing.
# Made where the network is:
#   git clone https://github.com/deepseek-ai/FlashMLA && git -C FlashMLA checkout 9241ae3
#   git -C FlashMLA submodule update --init csrc/cutlass && git -C FlashMLA/csrc/cutlass checkout 147f567
#   mkdir -p .ab && tar czf .ab/flashmla_src.tgz -C FlashMLA csrc
# STAGES (default none) are run by scripts/gpu_check.sh first, e.g. STAGES=test for the GPU suite; RUNS (default
# 2) is how many times the benchmark runs.
#   STAGES=test RUNS=1 bash docs/gpu/flashmla_1130_thirtyfourth/call.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp/mtpserve-flashmla}
mkdir -p "$out" /tmp/flashmla
OUT="$out" STAGES=${STAGES:-none} bash scripts/gpu_check.sh > "$out/check.log" 2>&1
grep -E "passed|failed|diverged" "$out/check.log" | tail -4
export PYTHONPATH=/tmp/site PATH=/usr/local/cuda/bin:$PATH MAX_JOBS=$(nproc)
python3 -c "import mtpserve._C" || { tail -40 "$out/check.log"; exit 1; }
tar xzf .ab/flashmla_src.tgz -C /tmp/flashmla
start=$(date +%s)
(cd scripts && python3 -c "import flashmla_reference as f; f.load('/tmp/flashmla')") > "$out/flashmla_build.log" 2>&1 \
  || { tail -40 "$out/flashmla_build.log"; exit 1; }
echo "FlashMLA build seconds: $(( $(date +%s) - start ))"
for run in $(seq ${RUNS:-2}); do
  timeout 200 python3 scripts/bench_mla_attention.py --flashmla /tmp/flashmla --reps ${REPS:-30} \
    --batches ${BATCHES:-1,16,64,128} --out "$out/run$run" > "$out/bench_$run.txt" 2>&1
  tail -${TAIL:-22} "$out/bench_$run.txt"
done
