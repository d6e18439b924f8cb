#!/usr/bin/env bash
# 2026-11-30, thirty-eighth session: the offline grid on this 2-core CPU (float32, greedy) with the adaptive policy at
# two stash sizes side by side, --deferred_fill_positions 64 (the CPU default) and 8, six runs one after another.
# analyse.py tabulates them.
cd "$(dirname "$0")/../.."
for i in 1 2 3 4 5 6; do
  .venv/bin/python scripts/bench_offline.py --devices cpu --batch-sizes 1 8 32 64 --ks 0 1 2 3 --adaptive-k-max 3 \
    --deferred-fill-positions 64 8 --max-tokens 128 --repeats 3 \
    --out docs/cpu_stash_size_1130_thirtyeighth/grid_r$i.json > /tmp/stash_r$i.log 2>&1
  echo "run $i done $(date +%T)"
done
