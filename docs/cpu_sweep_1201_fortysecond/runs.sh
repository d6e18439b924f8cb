#!/usr/bin/env bash
# The forty-second session's serving sweeps on this CPU (2 cores, float32, the embedded model): the fortieth
# session's commands (docs/cpu_sweep_1130_fortieth/runs.sh) at the cells that missed there, with cells four times
# as long (12 x c prompts, at least 16) and 5 repeats:
#   greedy at c = 2 and 4, every method; temperature 1.5 at c = 4, 8 and 32, k = 0 and adaptive; then temperature
#   1.5 at c = 8 again with --isolated (a fresh server per method and repeat, as on the GPU).
#   bash docs/cpu_sweep_1201_fortysecond/runs.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
sweep() { bash "$here/../cpu_sweep_1130_fortieth/runs.sh" run "$here" "$@" --repeats 5 --prompts-factor 12; }
sweep greedy_c2_4 --ks 0,1,2,3 --concurrencies 2,4
sweep t15_c4_32 --ks 0 --temperature 1.5 --concurrencies 4,8,32
sweep t15_c8_isolated --isolated --ks 0 --temperature 1.5 --concurrencies 8
