#!/usr/bin/env bash
# The fortieth session's serving sweeps on this CPU (2 cores, float32, the twenty-seventh session's commands, 3
# repeats, nothing else running): greedy c = 1..32, greedy c = 64 and 80, temperature 1.5 at every c.
#   bash docs/cpu_sweep_1130_fortieth/runs.sh
#   ... runs.sh run OUT NAME ARGS...: one sweep into OUT/NAME with ARGS after the common arguments (so that they win;
#   added for the forty-second session's runs, docs/cpu_sweep_1201_fortysecond/runs.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=docs/cpu_sweep_1130_fortieth
common="--adaptive-k-max 3 --repeats 3 --dataset-name sharegpt --sharegpt-split held-out --ignore-eos
  --sharegpt-max-total-len 768 --min-prompts 16 --prompts-factor 3 --disable-tqdm"
sweep() {  # name, then the cell's own arguments
  local name=$1; shift
  .venv/bin/python scripts/bench_mtp_sweep.py $common "$@" --out-dir "$out/$name" -- --dtype float32
  rm -rf "$out/$name/raw"
}
if [ "${1:-}" = run ]; then
  out=$2; shift 2; sweep "$@"; exit
fi
sweep greedy_c1_32 --ks 0,1,2,3 --concurrencies 1,2,4,8,16,32
sweep greedy_c64_80 --ks 0,1,2,3 --concurrencies 64,80
sweep t15 --ks 0 --temperature 1.5 --concurrencies 1,2,4,8,16,32,64,80
