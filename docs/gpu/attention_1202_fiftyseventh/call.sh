#!/usr/bin/env bash
# 2026-12-02, fifty-seventh session, on one H200 (carry .whl). `ab`: the tree against main's kernels before it (B:
# .ab/main, `git show 7ddbcd4:<path>` of the changed files). scripts/gpu_ab.sh builds both, runs the attention
# tests and their memcheck against A (tests.sh), and times A B A B at B = 1 (32 splits) and 16 (8 splits). Call 1
# ran it with the split combine through global memory (grid_combine.patch, not kept); call 2 with the combine
# kernel in blocks small enough to reach every SM; call 5 with that and a warp working out each row's weights;
# call 8 (TESTED=none BATCHES=2,4,8 CONTEXTS=2048,8192 KS=0,3) the batches between, untested, on cd2e59c.
# `table` (call 6): the GPU suite and the issue's whole kernel table on the tree.
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp/mtpserve-ab}
case ${1:-ab} in
  ab)
    AB_VARIANTS=".ab/main" AB_TESTED=${TESTED:-A} AB_TEST="bash docs/gpu/attention_1202_fiftyseventh/tests.sh" \
      AB_CMD="timeout 100 python3 scripts/bench_mla_attention.py --batches ${BATCHES:-1,16} --ks ${KS:-0,1,2,3} --contexts ${CONTEXTS:-8192} --reps 30 --breakdown --out \$RUN_OUT" \
      bash scripts/gpu_ab.sh > "$out/ab.log" 2>&1
    status=$?
    grep -E "^== tests|passed|failed|ERROR SUMMARY" "$out/ab.log" | head -8
    (cd "$out" && tar czf logs.tgz build.log rebuild_*.log environment.txt test_*.log && rm -f build.log rebuild_*.log environment.txt test_*.log)
    python3 scripts/ab_table.py "$out/runs.tgz" | tee "$out/ab_table.txt"
    exit $status ;;
  table)
    # A machine kept warm since an `ab` call holds B's objects, newer than this tree's copies: build them again.
    touch cpp/kernels/cuda/mla_attention.cu cpp/kernels/cuda/split_combine.cuh cpp/kernels/cuda/mla_cluster_combine.cuh
    STAGES=test OUT=$out bash scripts/gpu_check.sh
    status=$?
    timeout 200 python3 scripts/bench_mla_attention.py --breakdown --out "$out" 2>&1 | tail -24 | tee "$out/table.txt"
    exit $status ;;
esac
