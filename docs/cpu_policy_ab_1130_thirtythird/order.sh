#!/bin/bash
cd "$(dirname "$0")/../.."  # with make_order.patch applied (not kept)
for r in 1 2 3 4; do
  for o in methods reversed; do
    .venv/bin/python scripts/bench_offline.py --devices cpu --batch-sizes 64 --ks 0 1 2 3 --adaptive-k-max 3 --max-tokens 128 --repeats 3 --make-order $o --out .ab/order/${r}_$o.json > .ab/order/${r}_$o.log 2>&1
    echo "$r $o done $(date +%T)"
  done
done
