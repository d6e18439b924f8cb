#!/usr/bin/env bash
# 2026-11-30, thirty-eighth session: the offline grid on this 2-core CPU (float32, greedy), main's engine (base)
# against probe bursts that draft for a window of 8 sequences (window), six runs each, in the order AB BA AB ...
# The two builds' extensions are $AB/base.so and $AB/window.so; each run puts one in place. Tabulate with
# `python3 ../cpu_offline_1130_thirtyseventh/analyse.py 'base_r*.json'` (and 'window_r*.json').
cd "$(dirname "$0")/../.."
so=$(.venv/bin/python -c "import mtpserve._C as c; print(c.__file__)")
for i in 1 2 3 4 5 6; do
  order="base window"
  [ $(( i % 2 )) = 0 ] && order="window base"
  for v in $order; do
    cp "$AB/$v.so" "$so"
    .venv/bin/python scripts/bench_offline.py --devices cpu --batch-sizes 1 8 32 64 --ks 0 1 2 3 --adaptive-k-max 3 \
      --max-tokens 128 --repeats 3 --out docs/cpu_probe_window_1130_thirtyeighth/${v}_r$i.json > /tmp/grid_${v}_r$i.log 2>&1
    echo "$v run $i done $(date +%T)"
  done
done
cp "$AB/window.so" "$so"
