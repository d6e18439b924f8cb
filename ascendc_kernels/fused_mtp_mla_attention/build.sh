#!/usr/bin/env bash
# Build the kernel with a CANN toolkit (written for CANN 8.1.RC1 on an Atlas 800T/800I A2; not run
# on this project's machines, which have no CANN):
#   bash ascendc_kernels/fused_mtp_mla_attention/build.sh npu [Ascend910B2]   # device kernels
#   bash ascendc_kernels/fused_mtp_mla_attention/build.sh cpu [Ascend910B2]   # CPU-debug, then runs it
# Without CANN it says so and exits 1; tests/test_ascendc_attention.py covers the kernel on CPU.
set -euo pipefail
mode="${1:-npu}"
soc="${2:-Ascend910B2}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cann="${ASCEND_HOME_PATH:-/usr/local/Ascend/ascend-toolkit/latest}"
if [[ ! -d "$cann" ]]; then
  echo "no CANN toolkit at $cann (source .../ascend-toolkit/set_env.sh first)" >&2
  exit 1
fi
build="$root/build/ascendc_$mode"
cmake -S "$root/ascendc_kernels" -B "$build" -DRUN_MODE="$mode" -DSOC_VERSION="$soc" -DASCEND_CANN_PACKAGE_PATH="$cann"
cmake --build "$build" -j "$(nproc)"
if [[ "$mode" == cpu ]]; then
  "$build/fused_mtp_mla_attention/mla_cpu_debug"
fi
