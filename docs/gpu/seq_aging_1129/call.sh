#!/usr/bin/env bash
# The twenty-sixth session's device calls (lent H200s, torch 2.11.0+cu130, bf16; carry .whl), one stage each:
#   bash docs/gpu/seq_aging_1129/call.sh suite|offline|ab|sweep|gap|spread
# suite: the GPU test suite and the bf16 divergence rate of greedy MTP without --batch_invariant (pytest.log,
# mtp_divergence_*.json); offline: adaptive against k = 0 and fixed k = 1..3 offline, greedy and temperature 1.5
# (offline_adaptive_gpu*.json); sweep: the serving sweep's greedy cells that earlier GPU sweeps came closest to
# missing: greedy at c = 8, 32, 80 (k = 0, fixed k = 3, adaptive) and temperature 1.5 at c = 8, 64 (k = 0, adaptive),
# one server at a time, 24 x c prompts a cell and at least 144, 3 repeats (greedy.tgz, t15.tgz). SHAREGPT: the
# held-out ShareGPT JSON cut to each record's first two turns (what the benchmark reads). ab: the offline greedy A/B
# of 8d5cefe (A) against b0edcd7's acceptance_stats.* (B, in .ab/old), A B A B (ab_runs.tgz). gap: an MTP engine
# whose every sequence is retired against k = 0, offline continuous batching at 8 slots, temperature 1.5, with a
# profile of each (retired_gap.py, retired_gap.txt). spread: that load on a k = 0 engine in five processes one after
# another, to see how far separate processes of one engine differ (instance_spread.py, instance_spread.txt).
set -uo pipefail
cd "$(dirname "$0")/../../.."
case ${1:?stage} in
  suite) STAGES="test rate" bash scripts/gpu_check.sh ;;
  offline) STAGES=adaptive bash scripts/gpu_check.sh ;;
  sweep) STAGES=none bash scripts/gpu_check.sh > /dev/null 2>&1; export PYTHONPATH=/tmp/site
    sweep() {  # name, seconds allowed, then bench_mtp_sweep.py's own arguments
      local name=$1 seconds=$2; shift 2
      timeout $seconds python3 scripts/bench_mtp_sweep.py --isolated --adaptive-k-max 3 --repeats 3 --min-prompts 144 \
        --prompts-factor 24 --dataset-name sharegpt --dataset-path "$SHAREGPT" --sharegpt-split held-out --ignore-eos \
        --sharegpt-max-total-len 2000 --disable-tqdm --out-dir "$OUT/$name" "$@" -- --devices cuda:0 --dtype bfloat16 \
        > "$OUT/$name.log" 2>&1
      cat "$OUT/$name/results.md"; rm -rf "$OUT/$name/raw"; tar czf "$OUT/$name.tgz" -C "$OUT" "$name" && rm -rf "$OUT/$name"
    }
    sweep greedy 330 --ks 0,3 --temperature 0 --concurrencies 8,32,80
    sweep t15 220 --ks 0 --temperature 1.5 --concurrencies 8,64 ;;
  ab) AB_VARIANT=.ab/old AB_CMD='timeout 130 python3 scripts/bench_offline.py --devices cuda:0 --dtype bfloat16 --batch-sizes 1 8 32 64 --ks 3 --adaptive-k-max 3 --repeats 6 --max-tokens 256 --out $RUN_OUT/offline.json 2>&1 | grep "^|" | cut -d"|" -f2-8,16' \
        bash scripts/gpu_ab.sh ;;
  gap) STAGES=none bash scripts/gpu_check.sh > /dev/null 2>&1; export PYTHONPATH=/tmp/site
    timeout 500 python3 docs/gpu/seq_aging_1129/retired_gap.py "$SHAREGPT" 2>&1 | grep -v Loading | tee "$OUT/retired_gap.txt" ;;
  spread) STAGES=none bash scripts/gpu_check.sh > /dev/null 2>&1; export PYTHONPATH=/tmp/site
    for i in 1 2 3 4 5; do
      timeout 45 python3 docs/gpu/seq_aging_1129/instance_spread.py "$SHAREGPT" 2>&1 | grep '^pid'
    done | tee "$OUT/instance_spread.txt" ;;
esac
