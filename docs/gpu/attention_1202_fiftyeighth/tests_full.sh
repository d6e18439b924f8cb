#!/usr/bin/env bash
# Run by scripts/gpu_ab.sh against the version in place: its outputs on fixed inputs (tests.sh), then the attention
# tests and the batch-invariance attention tests, then compute-sanitizer memcheck over test_cuda_attention.py (the
# long-context split tests included: batch 1 at 8192 positions).
cd "$(dirname "$0")/../../.."
PYTEST_VERSIONS= bash docs/gpu/attention_1202_fiftyeighth/tests.sh || exit 1
timeout 240 python3 -m pytest -q -p no:cacheprovider -x -rfE tests/test_cuda_attention.py tests/test_batch_invariance.py \
  -k attention || exit 1
timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m pytest -q -p no:cacheprovider -x \
  tests/test_cuda_attention.py -k "not long or (long_context and h16)" 2>&1 | grep -E "ERROR SUMMARY|passed|failed" | tail -3
