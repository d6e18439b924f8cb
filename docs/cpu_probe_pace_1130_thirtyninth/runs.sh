#!/usr/bin/env bash
# 2026-11-30, thirty-ninth session: probe bursts at k = 0 with deferred fills paced by their cost (new) against one
# every 50 plans (base, 34fae1d), issue 14's greedy offline grid on this 2-core CPU (float32): k = 0, fixed k = 1..3
# and adaptive (k_max 3) at batch 1, 8, 32, 64, 128 tokens, 3 repeats a run, RUNS (default 6) runs of each build, the
# builds' _C alternating. AB (default /tmp/ab2) holds {base,new}/_C.so, OUT (default this folder) gets the JSON:
# the 2% budget as run here; the 1% one with AB=/tmp/ab3 OUT=docs/cpu_probe_pace_1130_thirtyninth/budget1.
cd "$(dirname "$0")/../.."
AB=${AB:-/tmp/ab2}
OUT=${OUT:-docs/cpu_probe_pace_1130_thirtyninth}
SO=.venv/lib/python3.11/site-packages/mtpserve/_C.cpython-311-x86_64-linux-gnu.so
for i in $(seq 1 "${RUNS:-6}"); do
  for b in base new; do
    [ $((i % 2)) = 0 ] && b=$([ $b = base ] && echo new || echo base)
    cp "$AB/$b/_C.so" $SO
    .venv/bin/python scripts/bench_offline.py --devices cpu --batch-sizes 1 8 32 64 --ks 0 1 2 3 --adaptive-k-max 3 \
      --max-tokens 128 --repeats 3 --out "$OUT/greedy_${b}_r$i.json" > "/tmp/$(basename "$OUT")_${b}_r$i.log" 2>&1
    echo "run $i $b done $(date +%T)"
  done
done
cp "$AB/new/_C.so" $SO
