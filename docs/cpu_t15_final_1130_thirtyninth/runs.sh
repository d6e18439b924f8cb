#!/usr/bin/env bash
# 2026-11-30, thirty-ninth session: issue 14's temperature-1.5 offline cells on this 2-core CPU (float32) on the
# session's final engine (cc34a5b): k = 0 and adaptive (k_max 3) at batch 1, 8, 32, 64, 3 repeats a run, six runs.
cd "$(dirname "$0")/../.."
for i in 1 2 3 4 5 6; do
  .venv/bin/python scripts/bench_offline.py --devices cpu --batch-sizes 1 8 32 64 --ks 0 --adaptive-k-max 3 \
    --temperature 1.5 --max-tokens 128 --repeats 3 --out docs/cpu_t15_final_1130_thirtyninth/t1.5_final_r$i.json \
    > /tmp/t15_final_r$i.log 2>&1
  echo "run $i done $(date +%T)"
done
