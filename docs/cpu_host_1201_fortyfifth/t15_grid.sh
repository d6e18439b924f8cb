#!/usr/bin/env bash
# 2026-12-01, forty-fifth session: bench_offline.py at temperature 1.5 on this CPU (k = 0 and adaptive, k_max 3, batch
# 1, 8, 32 and 64, 3 repeats; b78b160's engine), RUNS runs, from the repository root:
#   bash docs/cpu_host_1201_fortyfifth/t15_grid.sh RUNS OUTDIR   (this session: 4 runs; T_r<i>.json copied to t15_grid/)
cd "$(dirname "$0")/../.."
for i in $(seq 1 "${1:-4}"); do
  .venv/bin/python scripts/bench_offline.py --devices cpu --batch-sizes 1 8 32 64 --ks 0 --adaptive-k-max 3 \
    --temperature 1.5 --max-tokens 128 --repeats 3 --out "${2:-/tmp}/T_r$i.json" > "${2:-/tmp}/T_r$i.log" 2>&1
done
