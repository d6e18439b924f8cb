#!/usr/bin/env bash
# The forty-fifth session's serving sweeps on this CPU (2 cores, float32, embedded model) on main's engine
# (4b3c070's cost model; b78b160 changes only plan_ahead, off on a CPU), the fortieth session's commands
# (docs/cpu_sweep_1130_fortieth/runs.sh: 3 x c prompts, at least 16, 3 repeats), completing the greedy row
# beside the forty-fourth session's c = 32, 64 and 80:
#   bash docs/cpu_sweep_1201_fortyfifth/runs.sh greedy   greedy at c = 1, 2, 4, 8 and 16, k = 0, fixed k = 1..3, adaptive
#   bash docs/cpu_sweep_1201_fortyfifth/runs.sh t15      temperature 1.5 at c = 1..80, k = 0 and adaptive
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
case ${1:?greedy or t15} in
  greedy) bash "$here/../cpu_sweep_1130_fortieth/runs.sh" run "$here" greedy_c1_16 --ks 0,1,2,3 \
            --concurrencies 1,2,4,8,16 ;;
  t15) bash "$here/../cpu_sweep_1130_fortieth/runs.sh" run "$here" t15 --ks 0 --temperature 1.5 \
         --concurrencies 1,2,4,8,16,32,64,80 ;;
esac
