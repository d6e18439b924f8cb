#!/usr/bin/env bash
# 2026-12-01, forty-fourth session: A/B of two builds of the extension on this CPU, bench_offline.py at batch 64,
# greedy, k = 0 and adaptive (k_max 3), 3 repeats, the builds alternating run by run (the order reversed every other
# round), from the repository root: bash docs/cpu_host_1201_fortyfourth/ab.sh ROUNDS SO_DIR OUTDIR
# SO_DIR holds main.so and noage.so, each build's _C (main.so: 68af64d; noage.so: 4b3c070's change, before its
# comments were written and an unused counter removed); the installed _C is replaced before each run. Results:
# ab/AB_<build>_r<i>.json, read with analyse_runs.py.
cd "$(dirname "$0")/../.."
so=$(.venv/bin/python -c "import mtpserve._C as c; print(c.__file__)")
for i in $(seq 1 "${1:-10}"); do
  order="main noage"; [ $((i % 2)) = 0 ] && order="noage main"
  for v in $order; do
    cp "$2/$v.so" "$so"
    .venv/bin/python scripts/bench_offline.py --devices cpu --batch-sizes 64 --ks 0 --adaptive-k-max 3 \
      --max-tokens 128 --repeats 3 --out "$3/AB_${v}_r$i.json" > "$3/AB_${v}_r$i.log" 2>&1
  done
done
cp "$2/main.so" "$so"
