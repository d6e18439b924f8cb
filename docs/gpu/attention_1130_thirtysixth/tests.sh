#!/usr/bin/env bash
# The attention tests against the kernel in place, when it is the tree's (64-token tiles); with SANITIZE=1 also
# compute-sanitizer memcheck over test_cuda_attention.py.
cd "$(dirname "$0")/../../.."
grep -q "kTokens = 64" cpp/kernels/cuda/mla_attention_wgmma.cu || { echo "not the tree's kernel: no tests"; exit 0; }
timeout 240 python3 -m pytest -q -p no:cacheprovider -x -rfE tests/test_cuda_attention.py tests/test_batch_invariance.py \
  -k attention || exit 1
if [ -n "${SANITIZE:-}" ]; then
  timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m pytest -q -p no:cacheprovider -x \
    tests/test_cuda_attention.py -k "not long" 2>&1 | grep -E "ERROR SUMMARY|passed|failed" | tail -3
fi
