#!/usr/bin/env bash
# 2026-12-01, forty-third session: bench_offline.py at batch 64, greedy, k = 0 and adaptive (k_max 3), 3 repeats,
# alternating one run with each method's engine in a worker process of its own (--process-per-method: P) and one with
# both engines in one process (I, as before), from the repository root: bash docs/cpu_host_1201_fortythird/runs.sh N
# --process-per-method comes from process_per_method.diff (not landed): `git apply` it first.
cd "$(dirname "$0")/../.."
out=docs/cpu_host_1201_fortythird
for i in $(seq 1 "${1:-6}"); do
  for mode in P I; do
    flag=$([ $mode = P ] && echo --process-per-method)
    .venv/bin/python scripts/bench_offline.py --devices cpu --batch-sizes 64 --ks 0 --adaptive-k-max 3 \
      --max-tokens 128 --repeats 3 $flag --out $out/${mode}_r$i.json > /tmp/${mode}_r$i.log 2>&1
  done
done
