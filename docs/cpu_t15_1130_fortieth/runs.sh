#!/usr/bin/env bash
# 2026-11-30, fortieth session: the thirty-ninth session's temperature-1.5 offline runs (docs/cpu_t15_final_1130_
# thirtyninth/runs.sh) on a6f3024, whose class judges a sequence only on its first sight: k = 0 and adaptive (k_max 3)
# at batch 1, 8, 32, 64 on this 2-core CPU (float32), 3 repeats a run, four runs.
cd "$(dirname "$0")/../.."
for i in 1 2 3 4; do
  .venv/bin/python scripts/bench_offline.py --devices cpu --batch-sizes 1 8 32 64 --ks 0 --adaptive-k-max 3 \
    --temperature 1.5 --max-tokens 128 --repeats 3 --out docs/cpu_t15_1130_fortieth/t1.5_r$i.json \
    > /tmp/t15_40_r$i.log 2>&1
  echo "run $i done $(date +%T)"
done
