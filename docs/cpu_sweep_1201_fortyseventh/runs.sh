#!/usr/bin/env bash
# The forty-seventh session's CPU serving sweep (2 cores, float32, the embedded model, nothing else running) on
# d4a4db2: the forty-sixth session's temperature-1.5 sweep (docs/cpu_sweep_1201_fortysixth/runs.sh t15: c = 1..80,
# k = 0 and adaptive, 4 x c prompts (at least 32), --isolated) with 5 repeats instead of 3:
#   bash docs/cpu_sweep_1201_fortyseventh/runs.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bash "$here/../cpu_sweep_1130_fortieth/runs.sh" run "$here" t15_c1_80_r5 --isolated --ks 0 --temperature 1.5 \
  --concurrencies 1,2,4,8,16,32,64,80 --prompts-factor 4 --min-prompts 32 --repeats 5
