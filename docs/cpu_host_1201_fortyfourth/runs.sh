#!/usr/bin/env bash
# 2026-12-01, forty-fourth session: bench_offline.py at batch 64, greedy, k = 0 and adaptive (k_max 3), 3 repeats,
# with each method's untimed run at the batch before its repeats (this session's bench change), from the
# repository root: bash docs/cpu_host_1201_fortyfourth/runs.sh LAST [FIRST] (runs FIRST..LAST, W_r<i>.json)
cd "$(dirname "$0")/../.."
out=docs/cpu_host_1201_fortyfourth
for i in $(seq ${2:-1} "${1:-8}"); do
  .venv/bin/python scripts/bench_offline.py --devices cpu --batch-sizes 64 --ks 0 --adaptive-k-max 3 \
    --max-tokens 128 --repeats 3 --out $out/W_r$i.json > /tmp/cpu44/W_r$i.log 2>&1
done
