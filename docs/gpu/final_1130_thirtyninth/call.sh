#!/usr/bin/env bash
# 2026-11-30, thirty-ninth session, call 2 on one H200 (carry .whl): the GPU test suite on this session's final code,
# then --batch_invariant on the GPU (scripts/gpu_check.sh's test and invariant stages).
set -uo pipefail
cd "$(dirname "$0")/../../.."
STAGES="test invariant" bash scripts/gpu_check.sh
