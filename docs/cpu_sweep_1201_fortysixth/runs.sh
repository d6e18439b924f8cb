#!/usr/bin/env bash
# The forty-sixth session's CPU serving sweeps (2 cores, float32, the embedded model) on main's engine (5255ebd),
# all with --isolated (one server alive at a time, a fresh one per method and repeat), otherwise the fortieth
# session's commands (docs/cpu_sweep_1130_fortieth/runs.sh):
#   bash docs/cpu_sweep_1201_fortysixth/runs.sh t15_c4_8    the forty-fifth session's missed temperature-1.5 cells
#                                                          again: c = 4 and 8, k = 0 and adaptive, 8 x c prompts
#                                                          (at least 32), 5 repeats
#   bash docs/cpu_sweep_1201_fortysixth/runs.sh greedy_c4   its missed greedy cell: c = 4, k = 0, fixed k = 1..3 and
#                                                          adaptive, the same cells
#   bash docs/cpu_sweep_1201_fortysixth/runs.sh greedy      greedy at c = 1..80, k = 0, fixed k = 1..3 and adaptive,
#                                                          4 x c prompts (at least 32), 3 repeats
#   bash docs/cpu_sweep_1201_fortysixth/runs.sh t15         temperature 1.5 at c = 1..80, k = 0 and adaptive, 4 x c
#                                                          prompts (at least 32), 3 repeats
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
sweep() { bash "$here/../cpu_sweep_1130_fortieth/runs.sh" run "$here" "$@" --isolated; }
long="--repeats 5 --prompts-factor 8 --min-prompts 32"
every_c="--concurrencies 1,2,4,8,16,32,64,80 --prompts-factor 4 --min-prompts 32"
case ${1:?t15_c4_8, greedy_c4, greedy or t15} in
  t15_c4_8) sweep t15_c4_8 --ks 0 --temperature 1.5 --concurrencies 4,8 $long ;;
  greedy_c4) sweep greedy_c4 --ks 0,1,2,3 --concurrencies 4 $long ;;
  greedy) sweep greedy_c1_80 --ks 0,1,2,3 $every_c --repeats 3 ;;
  t15) sweep t15_c1_80 --ks 0 --temperature 1.5 $every_c --repeats 3 ;;
esac
