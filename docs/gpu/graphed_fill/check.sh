#!/usr/bin/env bash
# Branch graphed-fill (landed as the commit after 92af598; run on a lent H200 on 2026-11-29, twenty-first session,
# results in check.txt here): the MTP fill after a step with prompt tokens replays a piecewise graph of its row count
# instead of running eagerly (on the GPU's serving sweeps those steps cost the MTP methods 0.3-0.7 s more per cell
# than k = 0: docs/benchmarks.md, twentieth session). One call: build the branch, run the whole GPU suite
# (`pytest -m cuda`) on it, then the serving cells c = 32 and 64 on the branch (k = 0, fixed k = 3, adaptive) and on
# main (fixed k = 3, adaptive: k = 0 runs no MTP and so the same code), 2 repeats, a fresh server each.
# Run on the lent GPU from the repository root with .whl and .tl/sharegpt_heldout_2turns.json carried, and .ab/main/
# holding main's version of $FILES:
#   for f in cpp/engine/model_runner.h cpp/engine/model_runner.cpp; do
#     mkdir -p .ab/main/$(dirname $f); git show main:$f > .ab/main/$f; done
set -uo pipefail
out=${OUT:-/tmp/x}
t0=$(date +%s); ts() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $out/check.txt; }
FILES="cpp/engine/model_runner.h cpp/engine/model_runner.cpp"
STAGES=test scripts/gpu_check.sh > $out/build_and_test.log 2>&1
cp /tmp/build.log $out/ 2>/dev/null
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
grep -E "passed|failed|error|diverged|build seconds" $out/build_and_test.log | tail -30 >> $out/check.txt
ts "built and tested graphed-fill"
grep -q "cuda kernels: True" $out/environment.txt || exit 1
sweep() {  # sweep NAME KS: the serving cells on the version built now
  timeout ${3:-150} python3 scripts/bench_mtp_sweep.py --isolated --ks $2 --adaptive-k-max 3 --concurrencies 32,64 \
    --repeats 2 --min-prompts 144 --prompts-factor 24 --dataset-name sharegpt --dataset-path .tl/sharegpt_heldout_2turns.json \
    --sharegpt-split held-out --ignore-eos --sharegpt-max-total-len 2000 --disable-tqdm --temperature 0 \
    --out-dir $out/sweep_$1 -- --devices cuda:0 --dtype bfloat16 > $out/sweep_$1.log 2>&1
  grep -h captured $out/sweep_$1/server_*.log | sed "s/^.*captured/$1: captured/" | sort | uniq -c | tee -a $out/check.txt
  python3 - $out/sweep_$1/sweep.json $1 <<'PY' | tee -a $out/check.txt
import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    engine = r["duration_s"] * r["engine_busy"]
    print(f"{sys.argv[2]}: {r['method']:<22} c={r['concurrency']:<3} TPOT {r['mean_tpot_ms']:.3f} ms "
          f"(repeats {', '.join(f'{t:.3f}' for t in r['repeats_mean_tpot_ms'])}), engine {engine:.2f} s, "
          f"in steps with prompt tokens {engine * r['engine_prompt_steps']:.2f} s")
PY
  rm -rf $out/sweep_$1/raw
}
sweep graphed-fill 0,3 170
ts "swept graphed-fill"
for f in $FILES; do cp .ab/main/$f $f; done
python3 -m pip install --no-build-isolation --no-deps -e . > $out/rebuild.log 2>&1 || { tail -30 $out/rebuild.log; exit 1; }
ts "built main"
sweep main 3 120
ts done
