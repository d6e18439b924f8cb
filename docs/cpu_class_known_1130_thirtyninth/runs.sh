#!/usr/bin/env bash
# 2026-11-30, thirty-ninth session: a class's record known from 16 verifications of draft 1 (new) against 64 (base),
# issue 14's offline cells on this 2-core CPU (float32), k = 0 and adaptive (k_max 3) at batch 1, 8, 32, 64, 3 repeats
# a run, the two builds' _C alternating. TEMPERATURE (default 1.5) and RUNS (default 6) as given; the builds' _C
# in /tmp/ab/{base,new}/_C.so.
cd "$(dirname "$0")/../.."
T=${TEMPERATURE:-1.5}
SO=.venv/lib/python3.11/site-packages/mtpserve/_C.cpython-311-x86_64-linux-gnu.so
for i in $(seq 1 "${RUNS:-6}"); do
  for b in base new; do
    [ $((i % 2)) = 0 ] && b=$([ $b = base ] && echo new || echo base)
    cp /tmp/ab/$b/_C.so $SO
    .venv/bin/python scripts/bench_offline.py --devices cpu --batch-sizes 1 8 32 64 --ks 0 --adaptive-k-max 3 \
      --temperature "$T" --max-tokens 128 --repeats 3 --out docs/cpu_class_known_1130_thirtyninth/t${T}_${b}_r$i.json \
      > /tmp/class_t${T}_${b}_r$i.log 2>&1
    echo "run $i $b done $(date +%T)"
  done
done
cp /tmp/ab/new/_C.so $SO
