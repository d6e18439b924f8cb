#!/usr/bin/env bash
# Does this CPU's engine slow down when the hypervisor steals time? One offline engine decodes for $1 seconds
# (default 360) while steal.py reads /proc/stat once a second; steal_vs_step.py lines them up.
#   bash docs/cpu_steal_1202_fiftyfifth/run.sh [SECONDS] > docs/cpu_steal_1202_fiftyfifth/steal_N.txt
set -euo pipefail
seconds=${1:-360}
here=$(cd "$(dirname "$0")" && pwd)
python=$here/../../.venv/bin/python
out=$(mktemp -d)
"$python" "$here/steal.py" $((seconds + 20)) > "$out/steal.txt" &
"$python" "$here/decode_times.py" "$seconds" > "$out/steps.txt" 2>/dev/null
wait
"$python" "$here/steal_vs_step.py" "$out/steps.txt" "$out/steal.txt"
