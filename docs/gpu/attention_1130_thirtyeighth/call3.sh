#!/usr/bin/env bash
# 2026-11-30, thirty-eighth session, call 3 on the H200 of calls 1 and 2 (carry .whl, now with truststore and idna):
# the one test of call 2's suite that failed there, because the carried openai client's HTTP stack (httpx2,
# httpcore2) needs truststore, which .whl lacked.
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp/mtpserve-gpu}
mkdir -p "$out"
STAGES=none bash scripts/gpu_check.sh > /tmp/build.log 2>&1 || { tail -20 /tmp/build.log; exit 1; }
export PYTHONPATH=/tmp/site
timeout 200 python3 -m pytest -q -p no:cacheprovider -rfE tests/test_cuda_engine.py -k openai 2>&1 | tee "$out/openai_test.log"
