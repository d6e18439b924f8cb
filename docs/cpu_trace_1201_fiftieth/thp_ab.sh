#!/usr/bin/env bash
# The fiftieth session's A/B on this CPU: the server with and without torch's THP_MEM_ALLOC_ENABLE=1 (its CPU allocator
# asks for transparent huge pages for allocations of 2 MB and more), k = 0 at c = 16, a fresh server per run, 8
# alternating pairs; output in thp_ab.txt.  bash docs/cpu_trace_1201_fiftieth/thp_ab.sh
cd "$(dirname "$0")/../.."
mkdir -p /tmp/thp_ab
for i in 1 2 3 4 5 6 7 8; do
  for mode in off on; do
    if [ $mode = on ]; then export THP_MEM_ALLOC_ENABLE=1; else unset THP_MEM_ALLOC_ENABLE; fi
    .venv/bin/python scripts/bench_mtp_sweep.py --dataset-name sharegpt --sharegpt-split held-out --ignore-eos \
      --sharegpt-max-total-len 768 --disable-tqdm --prompts-factor 4 --min-prompts 32 --isolated --ks 0 \
      --concurrencies 16 --repeats 1 --out-dir /tmp/thp_ab/$mode$i -- --dtype float32 > /tmp/thp_ab/$mode$i.log 2>&1
    grep "repeat 0" /tmp/thp_ab/$mode$i.log | sed "s/^/$mode $i /"
  done
done
