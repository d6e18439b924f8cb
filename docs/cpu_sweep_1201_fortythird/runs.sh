#!/usr/bin/env bash
# The forty-third session's serving sweep on this CPU (2 cores, float32, the embedded model): temperature 1.5 at c = 8
# again with both servers alive at once (the forty-second session's one CPU miss, 0.936; 0.982 with --isolated), the
# fortieth session's commands (docs/cpu_sweep_1130_fortieth/runs.sh) with 12 x c prompts and 5 repeats:
#   bash docs/cpu_sweep_1201_fortythird/runs.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bash "$here/../cpu_sweep_1130_fortieth/runs.sh" run "$here" t15_c8 --ks 0 --temperature 1.5 --concurrencies 8 \
  --repeats 5 --prompts-factor 12
