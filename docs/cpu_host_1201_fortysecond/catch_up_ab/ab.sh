#!/usr/bin/env bash
# 2026-12-01, forty-second session: A/B of pricing the stash's catch-up (catch_up.diff applied and built; B sets
# MTP_PRICE_CATCH_UP, A does not), bench_offline.py at batch 64, greedy, on this CPU, six runs each, alternating.
cd "$(dirname "$0")/../../.."
out=docs/cpu_host_1201_fortysecond/catch_up_ab
for i in 1 2 3 4 5 6; do
  for v in A B; do
    if [ $v = B ]; then export MTP_PRICE_CATCH_UP=1; else unset MTP_PRICE_CATCH_UP; fi
    .venv/bin/python scripts/bench_offline.py --devices cpu --batch-sizes 64 --ks 0 --adaptive-k-max 3 \
      --max-tokens 128 --repeats 3 --out "$out/${v}_r$i.json" > "/tmp/${v}_r$i.log" 2>&1
    echo "$v $i done $(date +%T)"
  done
done
