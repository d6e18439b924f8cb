#!/usr/bin/env bash
# 2026-12-02, fifty-ninth session, this CPU (2 cores, float32, the embedded model): does backing torch's large CPU
# allocations with transparent huge pages (THP_MEM_ALLOC_ENABLE=1: 2 MB-aligned, madvised; this machine's THP mode is
# "madvise", so nothing else gets huge pages) remove the spread of step time between processes? Sixteen processes,
# eight with and eight without, in pairs whose order alternates; each runs k = 0 at batch 16, 5 repeats of 128
# tokens, in two engines (bench_offline.py's fixed k = 0 and adaptive with k_max 0). summ.py: each process's mean
# target forward time.
cd "$(dirname "$0")/../.."
mkdir -p /tmp/thp
for i in 1 2 3 4 5 6 7 8; do
  for e in 0 1; do
    [ $((i % 2)) -eq 0 ] && e=$((1 - e))
    THP_MEM_ALLOC_ENABLE=$e .venv/bin/python scripts/bench_offline.py --batch-sizes 16 --ks 0 --adaptive-k-max 0 \
      --repeats 5 --max-tokens 128 --dtype float32 --out /tmp/thp/out_${e}_$i 2>&1 \
      | grep '^{' > docs/cpu_thp_1202_fiftyninth/runs/runs_${e}_$i.jsonl
  done
done
