#!/usr/bin/env bash
# 2026-12-01, forty-third session: an A/A of runs.sh: k = 0 against k = 0 (graphs on and off, which on a CPU build
# the same engine), 3 repeats at batch 64, alternating a run with a process per method (PAA) and one in one process
# (IAA), from the repository root: bash docs/cpu_host_1201_fortythird/aa_runs.sh N
# --process-per-method comes from process_per_method.diff (not landed): `git apply` it first.
cd "$(dirname "$0")/../.."
out=docs/cpu_host_1201_fortythird
for i in $(seq 1 "${1:-5}"); do
  for mode in PAA IAA; do
    flag=$([ $mode = PAA ] && echo --process-per-method)
    .venv/bin/python scripts/bench_offline.py --devices cpu --batch-sizes 64 --ks 0 --graphs both \
      --max-tokens 128 --repeats 3 $flag --out $out/${mode}_r$i.json > /tmp/${mode}_r$i.log 2>&1
  done
done
