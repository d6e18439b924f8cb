#!/usr/bin/env bash
# 2026-11-30, thirty-ninth session: issue 14's greedy offline grid on this 2-core CPU (float32) on the session's final
# engine (cc34a5b), a set of six runs after the A/Bs: k = 0, fixed k = 1..3 and adaptive (k_max 3) at batch 1, 8, 32,
# 64, 128 tokens, 3 repeats a run. Analysed with docs/cpu_probe_pace_1130_thirtyninth/analyse.py and this folder.
cd "$(dirname "$0")/../.."
for i in 1 2 3 4 5 6; do
  .venv/bin/python scripts/bench_offline.py --devices cpu --batch-sizes 1 8 32 64 --ks 0 1 2 3 --adaptive-k-max 3 \
    --max-tokens 128 --repeats 3 --out docs/cpu_greedy_final_1130_thirtyninth/greedy_final_r$i.json \
    > /tmp/greedy_final_r$i.log 2>&1
  echo "run $i done $(date +%T)"
done
