#!/usr/bin/env bash
# The fiftieth session's CPU serving sweep (2 cores, float32, the embedded model; the engine unchanged since fc3a125,
# the sweep of d0ecbae, which keeps every repeat's chosen k): greedy at c = 1, 2, 4, the cells the forty-ninth
# session's sweep missed by the most at low c, with its arguments (k = 0, fixed k = 1..3 and adaptive, 4 x c prompts
# and at least 32, --isolated, 5 repeats).
#   bash docs/cpu_sweep_1201_fiftieth/runs.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bash "$here/../cpu_sweep_1130_fortieth/runs.sh" run "$here" greedy_c1_4 --ks 0,1,2,3 \
  --concurrencies 1,2,4 --prompts-factor 4 --min-prompts 32 --repeats 5 --isolated
