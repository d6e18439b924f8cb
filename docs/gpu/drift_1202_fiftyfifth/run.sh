#!/usr/bin/env bash
# The fifty-fifth session's H200 call (kind nvidia-h200, carry .whl): does the engine's host time drift with the
# machine? One offline engine (embedded model, bf16, CUDA graphs, k = 0, batch 4, greedy, 400 tokens a request)
# decodes for $1 seconds (default 150) with the host-phase clock (../sweep_1202_fiftythird/phases_every.patch: a
# PHASES line every 2,000 decode steps, stamped here with the wall clock), while cpu_probe.py times a fixed
# piece of Python work and a 64 MB copy on the last core, and nvidia-smi logs the GPU's clocks. Call 5 of the
# fifty-fifth session ran it as it was then: the engine could run on the probe's core, and no steal time was read.
# Since then the engine runs on the cores below the last two, and ../../cpu_steal_1202_fiftyfifth/steal.py reads
# the hypervisor's stolen share once a second (copy that folder along with this one to the device).
#   bash docs/gpu/drift_1202_fiftyfifth/run.sh [SECONDS]       then: python3 drift.py DIR (DIR holds the outputs)
set -uo pipefail
seconds=${1:-150}
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
git apply "$here/../sweep_1202_fiftythird/phases_every.patch" || exit 1
STAGES=none bash scripts/gpu_check.sh > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
stamp() { python3 -u -c 'import sys, time
for line in sys.stdin: print(f"{time.time():.3f} {line}", end="")'; }
last=$(( $(nproc) - 1 ))
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv -lms 500 \
  > "$OUT/gpu_clocks.csv" 2>&1 &
smi=$!
taskset -c "$last" python3 "$here/cpu_probe.py" $((seconds + 60)) > "$OUT/probe.txt" 2>&1 &
probe=$!
python3 "$here/../../cpu_steal_1202_fiftyfifth/steal.py" $((seconds + 60)) > "$OUT/steal.txt" 2>&1 &
steal=$!
taskset -c 0-$((last - 2)) python3 "$here/decode_loop.py" "$seconds" 2>&1 | stamp > "$OUT/engine.txt"
kill "$probe" "$steal" "$smi" 2>/dev/null
wait
git checkout -- cpp/engine/engine.cpp
python3 "$here/drift.py" "$OUT"
