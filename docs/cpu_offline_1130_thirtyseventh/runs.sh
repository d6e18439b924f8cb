#!/usr/bin/env bash
# 2026-11-30, thirty-seventh session: eight runs of the offline grid on this 2-core CPU (float32), one after another,
# on main's engine (unchanged since 7a599c7). analyse.py makes table.md from their JSON.
cd "$(dirname "$0")/../.."
for i in 1 2 3 4 5 6 7 8; do
  .venv/bin/python scripts/bench_offline.py --devices cpu --batch-sizes 1 8 32 64 --ks 0 1 2 3 --adaptive-k-max 3 \
    --max-tokens 128 --repeats 3 --out docs/cpu_offline_1130_thirtyseventh/grid_r$i.json \
    > /tmp/grid_r$i.log 2>&1
  echo "run $i done $(date +%T)"
done
