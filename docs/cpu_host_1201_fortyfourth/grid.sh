#!/usr/bin/env bash
# 2026-12-01, forty-fourth session: bench_offline.py's greedy grid on this CPU with the bench's untimed run of each
# method at each batch size: k = 0, fixed k = 1..3 and adaptive (k_max 3) at batch 1, 8, 32 and 64, 3 repeats,
# from the repository root: bash docs/cpu_host_1201_fortyfourth/grid.sh LAST OUTDIR [FIRST] (runs FIRST..LAST; this
# session ran it with OUTDIR /tmp/cpu44, and its G_r<i>.json are copied here)
cd "$(dirname "$0")/../.."
for i in $(seq "${3:-1}" "${1:-2}"); do
  .venv/bin/python scripts/bench_offline.py --devices cpu --batch-sizes 1 8 32 64 --ks 0 1 2 3 --adaptive-k-max 3 \
    --max-tokens 128 --repeats 3 --out "${2:-/tmp}/G_r$i.json" > "${2:-/tmp}/G_r$i.log" 2>&1
done
