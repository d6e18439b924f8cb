#!/usr/bin/env bash
# The forty-second session's device calls (one H200, kind nvidia-h200, torch 2.11.0+cu130, bf16; carry .whl and
# .data) on the engine whose retired sequences are read from Sequence::drafts:
#   SHAREGPT=<held-out ShareGPT JSON cut to two turns, gzipped> bash docs/gpu/sweep_1201_fortysecond/call.sh STAGE
#   t15_c80: the GPU engine tests (greedy MTP against k = 0, deferred fills, graphs, serving), then temperature 1.5
#            at c = 80 (the GPU's one miss), k = 0 and adaptive, 24 x c prompts, 5 repeats, a fresh server each
#   t15:     temperature 1.5 at c = 1..64, k = 0 and adaptive, 12 x c prompts (at least 72), 3 repeats: the row's
#            other cells on this engine
#   t15_long: temperature 1.5 at c = 16 and 64 again (the t15 call's misses), 24 x c prompts and 5 repeats
#   suite:   the whole GPU test suite (scripts/gpu_check.sh's test stage)
#   offline: issue 14's offline bars (scripts/gpu_check.sh's adaptive stage: greedy and temperature 1.5, batch 1..64)
#   batch1:  a probe build (batch1_laps.diff: each engine thread's mean host time per part of a batch-1 decode step
#            at k = 0, printed as PROBE lines when the engine stops) runs temperature 1.5 offline at batch 1, k = 0
#            and adaptive, twice; then the tree's build runs it once more, and greedy at batch 8 with fixed k = 3
#            and adaptive (the offline stage's two misses); 9 interleaved repeats each
# A sweep is docs/gpu/sweep_1130_fortieth/call.sh's (its build, client and server arguments).
set -uo pipefail
here=$(dirname "$0")
sweep() { bash "$here/../sweep_1130_fortieth/call.sh" run "$@"; }
offline() {  # name, then bench_offline.py's arguments: adaptive (k_max 3) beside them, 9 interleaved repeats
  local name=$1; shift
  PYTHONPATH=/tmp/site python3 scripts/bench_offline.py --devices cuda:0 --dtype bfloat16 --adaptive-k-max 3 \
    --repeats 9 --out "$OUT/$name.json" "$@" 2>&1 | grep -E '^\| (k=0|fixed|adapt)|PROBE' | tee "$OUT/$name.txt"
}
case ${1:?stage} in
  t15_c80)
    STAGES=test TESTS="tests/test_cuda_engine.py tests/test_cuda_deferred_fill.py tests/test_cuda_graphs.py" \
      bash "$here/../../../scripts/gpu_check.sh"
    sweep t15_c80 300 --ks 0 --adaptive-k-max 3 --temperature 1.5 --concurrencies 80 --repeats 5 --prompts-factor 24 ;;
  t15) sweep t15_c1_64 420 --ks 0 --adaptive-k-max 3 --temperature 1.5 --concurrencies 1,2,4,8,16,32,64 ;;
  t15_long) sweep t15_c16_64 420 --ks 0 --adaptive-k-max 3 --temperature 1.5 --concurrencies 16,64 --repeats 5 \
              --prompts-factor 24 ;;
  suite) STAGES=test bash "$here/../../../scripts/gpu_check.sh" ;;
  offline) STAGES=adaptive bash "$here/../../../scripts/gpu_check.sh" ;;
  batch1)
    diff=$here/batch1_laps.diff
    { git apply "$diff" || patch -p1 < "$diff"; } && STAGES=none bash scripts/gpu_check.sh > /dev/null || exit 1
    offline t15_b1_probe_run1 --ks 0 --batch-sizes 1 --temperature 1.5
    offline t15_b1_probe_run2 --ks 0 --batch-sizes 1 --temperature 1.5
    { git apply -R "$diff" || patch -R -p1 < "$diff"; } && STAGES=none bash scripts/gpu_check.sh > /dev/null || exit 1
    offline t15_b1 --ks 0 --batch-sizes 1 --temperature 1.5
    offline greedy_b8 --ks 3 --batch-sizes 8 ;;
esac
