#!/usr/bin/env bash
# 2026-11-30, thirty-eighth session, call 4 on two H200s of one host (kind nvidia-h200-x2, carry .whl): the
# tensor- and expert-parallel tests over NCCL (the test part of scripts/gpu_check.sh's tp stage, without its
# benchmarks).
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp/mtpserve-gpu}
mkdir -p "$out"
STAGES=none bash scripts/gpu_check.sh > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
export PYTHONPATH=/tmp/site NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 420 python3 -m pytest -q -p no:cacheprovider -rfE -s tests/test_cuda_tensor_parallel.py \
  tests/test_tensor_parallel.py tests/test_expert_parallel.py > "$out/tp_pytest.log" 2>&1
status=$?
grep -E "passed|failed|error|diverge" "$out/tp_pytest.log" | tail -20
exit $status
