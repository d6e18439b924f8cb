#!/usr/bin/env bash
# 2026-12-01, forty-second session: catch_up_ab/ab.sh's A runs (main's policy; bench_offline.py at batch 64, greedy,
# k = 0 and adaptive in one process, 3 repeats) again, six runs, with the OpenMP pools' idle threads sleeping at once
# instead of spinning (OMP_WAIT_POLICY=PASSIVE).
cd "$(dirname "$0")/../../.."
for i in 1 2 3 4 5 6; do
  OMP_WAIT_POLICY=PASSIVE .venv/bin/python scripts/bench_offline.py --devices cpu --batch-sizes 64 --ks 0 \
    --adaptive-k-max 3 --max-tokens 128 --repeats 3 --out docs/cpu_host_1201_fortysecond/omp_passive/P_r$i.json \
    > /tmp/P_r$i.log 2>&1
done
