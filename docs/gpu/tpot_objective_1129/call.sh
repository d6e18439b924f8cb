#!/usr/bin/env bash
# The device calls of 2026-11-29, twenty-fourth session: the adaptive policy choosing the step k by the batch's
# mean time per token instead of its tokens per second, on a lent H200 (bf16, CUDA graphs on, the embedded model).
#   offline  bench_offline.py at batch 1, 8, 32, 64, 128 tokens, the methods in a Williams order (one whole cycle):
#            greedy, k = 0..3 fixed and adaptive, 10 repeats; temperature 1.5, k = 0, fixed k = 3 and adaptive,
#            6 repeats (offline_greedy.*, offline_t15.*)
#   sweep    the serving sweep where the last GPU sweep missed, one server alive at a time: greedy c = 32 (k = 0,
#            fixed k = 3, adaptive) and temperature 1.5 c = 8 (k = 0, adaptive), 3 repeats, 24 x c prompts and at
#            least 144 (sweep_*.tgz, sweep_*.md)
#   trace    plan_trace.patch applied (never landed: each plan's bucket, warm-up, probe, k before and after
#            retirement, the estimate's time per token at each k), then one adaptive server at greedy c = 32 as in
#            sweep (trace_c32.txt, here gzipped: its plan lines; trace_c32.md: the cell)
#   c32_r5   greedy c = 32 again (k = 0, fixed k = 3, adaptive), 5 repeats (sweep_c32_r5.md, .tgz)
#   lossless the engine's batch-invariance tests, greedy (tests/test_batch_invariance.py -k greedy, cuda), then
#            scripts/mtp_divergence.py --batch-invariant under adaptive: greedy MTP at k = 1..3 against k = 0 in bf16,
#            batches 1, 8, 32, 64 (pytest_greedy.log, mtp_divergence_*.json)
# The sixth call, an A/B of this objective (A, 228cb3b) against the tokens/s one (B: speculation_policy.cpp and .h of
# 414a393 under .ab/old), A B A B on one machine (ab_offline_runs.tgz):
#   AB_VARIANT=.ab/old AB_CMD='python3 scripts/bench_offline.py --devices cuda:0 --dtype bfloat16 --batch-sizes 8 32 64
#     --ks 0 3 --adaptive-k-max 3 --max-tokens 128 --repeats 6 --out $RUN_OUT/greedy.json' bash scripts/gpu_ab.sh
# Usage: SHAREGPT=<held-out ShareGPT JSON> call.sh offline|sweep|trace|lossless|c32_r5 ...
set -uo pipefail
[[ " $* " == *" trace "* ]] && git apply docs/gpu/tpot_objective_1129/plan_trace.patch
STAGES=none bash scripts/gpu_check.sh > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1  # the wheels gpu_check.sh installed from .whl
for stage in "$@"; do
  case $stage in
    offline)
      for run in greedy:"--ks 0 1 2 3 --repeats 10" t15:"--ks 0 3 --temperature 1.5 --repeats 6"; do
        timeout 270 python3 scripts/bench_offline.py --devices cuda:0 --dtype bfloat16 --batch-sizes 1 8 32 64 \
          --adaptive-k-max 3 --max-tokens 128 ${run#*:} --out $OUT/offline_${run%%:*}.json 2>&1 \
          | grep -v "Loading" > $OUT/offline_${run%%:*}.txt
        grep "^|" $OUT/offline_${run%%:*}.txt
      done ;;
    sweep)
      for run in greedy:"--ks 0,3 --temperature 0 --concurrencies 32" t15:"--ks 0 --temperature 1.5 --concurrencies 8"; do
        dir=sweep_${run%%:*}
        timeout 250 python3 scripts/bench_mtp_sweep.py --isolated --adaptive-k-max 3 --repeats 3 --min-prompts 144 \
          --prompts-factor 24 --dataset-name sharegpt --dataset-path ${SHAREGPT:?} --sharegpt-split held-out \
          --ignore-eos --sharegpt-max-total-len 2000 --disable-tqdm --out-dir $OUT/$dir ${run#*:} \
          -- --devices cuda:0 --dtype bfloat16 > $OUT/$dir.log 2>&1
        grep -E "repeat|error" $OUT/$dir.log
        cp $OUT/$dir/results.md $OUT/$dir.md 2>/dev/null
        rm -rf $OUT/$dir/raw; tar czf $OUT/$dir.tgz -C $OUT $dir && rm -rf $OUT/$dir
      done ;;
    c32_r5)
      timeout 400 python3 scripts/bench_mtp_sweep.py --isolated --adaptive-k-max 3 --repeats 5 --min-prompts 144 \
        --prompts-factor 24 --dataset-name sharegpt --dataset-path ${SHAREGPT:?} --sharegpt-split held-out \
        --ignore-eos --sharegpt-max-total-len 2000 --disable-tqdm --out-dir $OUT/sweep_c32_r5 --ks 0,3 \
        --temperature 0 --concurrencies 32 -- --devices cuda:0 --dtype bfloat16 > $OUT/sweep_c32_r5.log 2>&1
      grep -E "repeat|error" $OUT/sweep_c32_r5.log
      cp $OUT/sweep_c32_r5/results.md $OUT/sweep_c32_r5.md 2>/dev/null
      rm -rf $OUT/sweep_c32_r5/raw; tar czf $OUT/sweep_c32_r5.tgz -C $OUT sweep_c32_r5 && rm -rf $OUT/sweep_c32_r5 ;;
    lossless)
      timeout 150 python3 -m pytest -q -p no:cacheprovider -m cuda -rfE tests/test_batch_invariance.py -k greedy \
        > $OUT/pytest_greedy.log 2>&1; tail -3 $OUT/pytest_greedy.log
      timeout 150 python3 scripts/mtp_divergence.py --devices cuda:0 --dtype bfloat16 --batches 1 8 32 64 \
        --batch-invariant --speculative-policy adaptive --out $OUT 2>&1 | grep '^|' ;;
    trace)
      MTP_TRACE=1 timeout 200 python3 scripts/bench_mtp_sweep.py --isolated --adaptive-k-max 3 --repeats 1 \
        --min-prompts 144 --prompts-factor 24 --dataset-name sharegpt --dataset-path ${SHAREGPT:?} \
        --sharegpt-split held-out --ignore-eos --sharegpt-max-total-len 2000 --disable-tqdm --out-dir $OUT/trace \
        --ks 0 --temperature 0 --concurrencies 32 -- --devices cuda:0 --dtype bfloat16 > $OUT/trace.log 2>&1
      grep -E "repeat|error" $OUT/trace.log
      grep -hE "^(PLAN|WARM)" $OUT/trace/server_MTP_adaptive*.log > $OUT/trace_c32.txt
      cp $OUT/trace/results.md $OUT/trace_c32.md; rm -rf $OUT/trace
      wc -l $OUT/trace_c32.txt ;;
  esac
done
