#!/usr/bin/env bash
# The forty-ninth session's CPU serving sweep (2 cores, float32, the embedded model; the engine unchanged since
# 5255ebd): greedy at c = 1..80, k = 0, fixed k = 1..3 and adaptive (k_max 3), 4 x c prompts (at least 32), 5
# repeats, --isolated (a fresh server per method and repeat): the forty-sixth session's greedy sweep
# (docs/cpu_sweep_1201_fortysixth/runs.sh greedy) with 5 repeats instead of 3.
#   bash docs/cpu_sweep_1201_fortyninth/runs.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bash "$here/../cpu_sweep_1130_fortieth/runs.sh" run "$here" greedy_c1_80 --ks 0,1,2,3 \
  --concurrencies 1,2,4,8,16,32,64,80 --prompts-factor 4 --min-prompts 32 --repeats 5 --isolated
