#!/usr/bin/env bash
# The fifty-sixth session's CPU serving sweep (2 cores, float32, the embedded model; 5748158's engine, HEAD's): greedy
# at c = 1..80, k = 0, fixed k = 1..3 and adaptive (k_max 3), 4 x c prompts (at least 32), 3 repeats, --isolated (a
# fresh server per method and repeat): the forty-ninth session's sweep (docs/cpu_sweep_1201_fortyninth/runs.sh) with
# 3 repeats, in two parts so that each part finishes on its own, and with each repeat's stolen CPU share recorded.
#   bash docs/cpu_sweep_1202_fiftysixth/runs.sh
# Then steal.txt and pool.txt: docs/gpu/sweep_1202_fiftysixth/steal.py and pool.py over the two sweep.json files.
#   bash docs/cpu_sweep_1202_fiftysixth/runs.sh t15
# runs the temperature-1.5 sweep at c = 1..32 (k = 0 and adaptive, the fortieth session's arguments) with
# --rerun-stolen 1 instead: t15_c1_32/.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" = t15 ]; then
  exec bash "$here/../cpu_sweep_1130_fortieth/runs.sh" run "$here" t15_c1_32 --ks 0 --temperature 1.5 \
    --concurrencies 1,2,4,8,16,32 --isolated --rerun-stolen 1
fi
for part in "greedy_c1_32 1,2,4,8,16,32" "greedy_c64_80 64,80"; do
  set -- $part
  bash "$here/../cpu_sweep_1130_fortieth/runs.sh" run "$here" "$1" --ks 0,1,2,3 --concurrencies "$2" \
    --prompts-factor 4 --min-prompts 32 --repeats 3 --isolated
done
