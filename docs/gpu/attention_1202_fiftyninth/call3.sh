#!/usr/bin/env bash
# 2026-12-02, fifty-ninth session, on one H200 (carry .whl and .ab). The tree (A, as f166bde: every thread's share of
# the Q tile, thread 0's included, is copied before thread 0 starts the first two KV tiles' copies) against main's
# kernel file (.ab/main: `git show 28db75d:cpp/kernels/cuda/mla_attention_wgmma.cu`) and against A with the split
# partials stored 16 bytes at a time (.ab/vec_store: mla_attention_tile.cuh with vec_store.patch). scripts/gpu_ab.sh
# builds all three, dumps each one's outputs on fixed inputs, runs the attention tests against A and vec_store, then
# times A B C twice at B = 1, 16 and 64, k = 0 and 3 (context 8192), with each call's kernels (--breakdown).
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp/mtpserve-ab}
old=docs/gpu/attention_1202_fiftyeighth
export PYTEST_VERSIONS="A vec_store"
AB_VARIANTS=".ab/main .ab/vec_store" AB_TEST="bash docs/gpu/attention_1202_fiftyninth/tests.sh" AB_ROUNDS=2 \
  AB_CMD="timeout 120 python3 scripts/bench_mla_attention.py --batches 1,16,64 --ks 0,3 --reps 30 --breakdown --out \$RUN_OUT" \
  bash scripts/gpu_ab.sh > "$out/ab.log" 2>&1
echo "gpu_ab status $?"
grep -E "^== tests|^version|dumped|passed|failed|ERROR SUMMARY" "$out/ab.log" | head -20
python3 $old/cmp_dumps.py /tmp/dumps | tee "$out/dumps.txt"
(cd "$out" && tar czf logs.tgz build.log rebuild_*.log environment.txt test_*.log 2>/dev/null && rm -f build.log rebuild_*.log environment.txt test_*.log)
python3 scripts/ab_table.py "$out/runs.tgz" | tee "$out/ab_table.txt"
python3 docs/gpu/attention_1202_fiftyninth/kernels.py "$out/runs.tgz" | tee "$out/kernels.txt"
