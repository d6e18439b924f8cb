# Branch capture-stream against main in one call (2026-11-29, twentieth session): every CUDA graph captured on one
# stream per device instead of a stream from torch's pool per capture. For each version: the start-up log at k = 0
# and 3 with prompt-step graphs on and off, then the whole GPU suite (main also under compute-sanitizer's kernel
# tests). Run on the lent GPU from the repository root of fc30207 with .whl carried, after
#   git show 9716f92:cpp/kernels/cuda/step_graph_cuda.cpp > branch_step_graph.cpp
#   (the branch's file, as landed; an untracked file in the tree travels with it)
set -uo pipefail
out=${OUT:-/tmp/x}
t0=$(date +%s); ts() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $out/check.txt; }
startup() {  # version name
  timeout 150 python3 - <<'PY' 2>&1 | grep -E "captured|^k=" | sed "s/^/$1: /" | tee -a $out/check.txt
import logging
import torch
from mtpserve import LLM
logging.basicConfig(level=logging.INFO)
for k in (0, 3):
    for prefill in (True, False):
        print(f"k={k} enable_prefill_graph={prefill}", flush=True)
        llm = LLM(devices="cuda:0", dtype="bfloat16", num_speculative_tokens=k, enable_prefill_graph=prefill,
                  max_cache_blocks=256)
        llm.shutdown()
        del llm
        torch.cuda.empty_cache()
PY
}
OUT=$out/main STAGES=none bash scripts/gpu_check.sh > $out/build_main.log 2>&1 || { tail -30 $out/build_main.log; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
ts built main
startup main
ts main start-up logged
OUT=$out/main STAGES="test sanitize" bash scripts/gpu_check.sh 2>&1 | tail -8 | tee -a $out/check.txt
ts main tested
cp branch_step_graph.cpp cpp/kernels/cuda/step_graph_cuda.cpp
OUT=$out/branch STAGES=none bash scripts/gpu_check.sh > $out/build_branch.log 2>&1 || { tail -30 $out/build_branch.log; exit 1; }
ts built branch
startup branch
ts branch start-up logged
OUT=$out/branch STAGES=test bash scripts/gpu_check.sh 2>&1 | tail -6 | tee -a $out/check.txt
ts branch tested
