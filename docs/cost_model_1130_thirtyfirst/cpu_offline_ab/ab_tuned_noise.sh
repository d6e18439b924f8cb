#!/bin/bash
# A/B of the step cost model on this CPU: old (HEAD 7a599c7) and new (DriftingCostFit) builds of _C, alternating.
cd /work/main
SO=$(ls .venv/lib/python3.11/site-packages/mtpserve/_C*.so)
for round in ${ROUNDS:-1 2 3}; do
  for v in old tuned; do
    cp /tmp/ab/$v.so $SO
    .venv/bin/python scripts/bench_offline.py --devices cpu --batch-sizes 1 8 32 --ks 0 1 2 3 --adaptive-k-max 3 \
      --max-tokens 128 --repeats 5 --out /tmp/ab/runs2/${v}_$round.json > /tmp/ab/runs2/${v}_$round.log 2>&1
    echo "$v $round $(date +%T)"
  done
done
cp /tmp/ab/old.so $SO
