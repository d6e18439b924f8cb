#!/usr/bin/env bash
# 2026-11-30, thirty-eighth session: issue 14's temperature-1.5 offline cells on this 2-core CPU (float32), main's
# engine: k = 0, fixed k = 3 and adaptive (k_max 3) at batch 1, 8, 32, 64, 3 repeats a run, five runs in a row.
cd "$(dirname "$0")/../.."
for i in 1 2 3 4 5; do
  .venv/bin/python scripts/bench_offline.py --devices cpu --batch-sizes 1 8 32 64 --ks 0 3 --adaptive-k-max 3 \
    --temperature 1.5 --max-tokens 128 --repeats 3 --out docs/cpu_t15_1130_thirtyeighth/t15_r$i.json \
    > /tmp/t15_r$i.log 2>&1
  echo "run $i done $(date +%T)"
done
