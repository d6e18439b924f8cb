#!/usr/bin/env bash
# The forty-fourth session's serving sweep on this CPU (2 cores, float32, the embedded model) on 4b3c070's engine
# (the verify line forgets per sample only): greedy at c = 32, 64 and 80, where drafting is near its break-even
# here, with k = 0, fixed k = 1 and adaptive (k_max 3), the fortieth session's commands
# (docs/cpu_sweep_1130_fortieth/runs.sh: 3 x c prompts, at least 16, 3 repeats):
#   bash docs/cpu_sweep_1201_fortyfourth/runs.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bash "$here/../cpu_sweep_1130_fortieth/runs.sh" run "$here" greedy_c32_80 --ks 0,1 --concurrencies 32,64,80
