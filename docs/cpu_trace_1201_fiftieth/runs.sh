#!/usr/bin/env bash
# The fiftieth session's trace of the adaptive policy on this CPU (2 cores, float32, the embedded model, the engine of
# 573cf72): trace.patch (not on main) prints, with MTPSERVE_TRACE=1, each decode step's measured and predicted verify
# seconds, each draft phase's seconds, each plan's estimate at every k, the chosen plan's expected tokens and the
# tokens each step emitted. The sweeps are issue 14's CPU cells (docs/cpu_sweep_1201_fortyninth/runs.sh's arguments,
# through the fortieth session's runs.sh), into /tmp/trace1, /tmp/trace2, /tmp/trace4:
#   one  c = 8, 16, k = 0, fixed k = 1, 2, 3 and adaptive, 1 repeat (patch without the `chose` / `emitted` lines)
#   two  c = 16, k = 0, fixed k = 2 and adaptive, 6 repeats (the same)
#   four c = 8, 16, fixed k = 1 and adaptive, 1 repeat (the whole patch)
# then analyze.py on their server logs (results.md).
#   git apply docs/cpu_trace_1201_fiftieth/trace.patch && .venv/bin/pip install --no-build-isolation -e ".[test]"
#   bash docs/cpu_trace_1201_fiftieth/runs.sh one|two|four     (then git checkout cpp/ and rebuild)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
sweep() {  # name, then the sweep's own arguments
  local name=$1; shift
  MTPSERVE_TRACE=1 bash "$here/../cpu_sweep_1130_fortieth/runs.sh" run /tmp "$name" --prompts-factor 4 \
    --min-prompts 32 --isolated "$@"
}
case ${1:?one, two or four} in
  one) sweep trace1 --ks 0,1,2,3 --concurrencies 8,16 --repeats 1 ;;
  two) sweep trace2 --ks 0,2 --concurrencies 16 --repeats 6 ;;
  four) sweep trace4 --ks 1 --concurrencies 8,16 --repeats 1 ;;
esac
