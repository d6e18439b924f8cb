#!/usr/bin/env bash
# 2026-12-02, fifty-ninth session, on one H200 (carry .whl, as scripts/device_wheels.sh now fills it, with the three
# CPU-only test files' imports): the GPU suite alone, to see its exit status come back 0.
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp}
STAGES=test OUT=$out/suite bash scripts/gpu_check.sh > "$out/suite.log" 2>&1
echo "gpu_check status $?"
tail -4 "$out/suite.log"
