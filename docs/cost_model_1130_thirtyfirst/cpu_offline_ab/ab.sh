#!/bin/bash
# A/B of two builds of _C on this CPU, alternating A then B each round (built beforehand and saved as <dir>/<name>.so):
#   ROUNDS="1 2 3" bash ab.sh <dir> <name A> <name B> <runs dir>
# First A/B: ab.sh /tmp/ab old new /tmp/ab/runs (rounds 1-6); the candidate's: ab.sh /tmp/ab old tuned /tmp/ab/runs2.
cd "$(dirname "$0")/../../.."
dir=$1 a=$2 b=$3 runs=$4
SO=$(ls .venv/lib/python3.11/site-packages/mtpserve/_C*.so)
mkdir -p "$runs"
for round in ${ROUNDS:-1 2 3}; do
  for v in "$a" "$b"; do
    cp "$dir/$v.so" "$SO"
    .venv/bin/python scripts/bench_offline.py --devices cpu --batch-sizes 1 8 32 --ks 0 1 2 3 --adaptive-k-max 3 \
      --max-tokens 128 --repeats 5 --out "$runs/${v}_$round.json" > "$runs/${v}_$round.log" 2>&1
    echo "$v $round $(date +%T)"
  done
done
cp "$dir/$a.so" "$SO"
