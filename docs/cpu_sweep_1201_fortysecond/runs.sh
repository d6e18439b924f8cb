#!/usr/bin/env bash
# The forty-second session's serving sweeps on this CPU (2 cores, float32, the embedded model): the fortieth
# session's commands (docs/cpu_sweep_1130_fortieth/runs.sh) at the cells that missed there, with cells four times
# as long (12 x c prompts, at least 16) and 5 repeats:
#   greedy at c = 2 and 4, every method; temperature 1.5 at c = 4, 8 and 32, k = 0 and adaptive; then temperature
#   1.5 at c = 8 again with --isolated (a fresh server per method and repeat, as on the GPU).
#   bash docs/cpu_sweep_1201_fortysecond/runs.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
out=docs/cpu_sweep_1201_fortysecond
common="--adaptive-k-max 3 --repeats 5 --dataset-name sharegpt --sharegpt-split held-out --ignore-eos
  --sharegpt-max-total-len 768 --min-prompts 16 --prompts-factor 12 --disable-tqdm"
sweep() {  # name, then the cell's own arguments
  local name=$1; shift
  .venv/bin/python scripts/bench_mtp_sweep.py "$@" $common --out-dir "$out/$name" -- --dtype float32
  rm -rf "$out/$name/raw"
}
sweep greedy_c2_4 --ks 0,1,2,3 --concurrencies 2,4
sweep t15_c4_32 --ks 0 --temperature 1.5 --concurrencies 4,8,32
sweep t15_c8_isolated --isolated --ks 0 --temperature 1.5 --concurrencies 8
