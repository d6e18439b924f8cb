#!/usr/bin/env bash
# 2026-12-02, fifty-eighth session, on one H200 (carry .whl and .ab). The tree (A) against the variants in .ab
# (AB_VARIANTS; their kernel file, mla_attention_wgmma.cu): scripts/gpu_ab.sh builds each, dumps each one's outputs
# on fixed inputs and runs the attention tests against those in PYTEST_VERSIONS (tests.sh), then times A B C ...
# twice at B = 16, 64 and 128, k = 0 and 3 (context 8192). Call 2: .ab/pf_ab (tiles a + 2 and b + 2 prefetched
# into L2 at the top of each pair) and .ab/wg1_late (warpgroup 1 scores tile b behind its P_a V_a). Call 3
# (VARIANTS=.ab/main TESTS=tests_full.sh TESTED=A BATCHES=1,16,64,128 KS=0,1,2,3): the tree, with wg1_late, against
# main's kernel file (`git show 9d5e8d7:cpp/kernels/cuda/mla_attention_wgmma.cu`), the tree tested in full. Call 4
# (VARIANTS=".ab/first_pair .ab/main" PYTEST_VERSIONS=first_pair BATCHES=1,16,64): the tree against .ab/first_pair
# (the first pair's tile b scored beside tile a, as main does) and main. Call 5 (VARIANTS=".ab/main .ab/late"
# PYTEST_VERSIONS=A BATCHES=1,2,4,16): the tree, which scores late only where the launch's blocks fill half the SMs,
# against main (never late) and .ab/late (always late: the tree of call 3).
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp/mtpserve-ab}
here=docs/gpu/attention_1202_fiftyeighth
export PYTEST_VERSIONS=${PYTEST_VERSIONS:-wg1_late}
AB_VARIANTS=${VARIANTS:-".ab/pf_ab .ab/wg1_late"} AB_TEST="bash $here/${TESTS:-tests.sh}" AB_TESTED=${TESTED:-} AB_ROUNDS=${ROUNDS:-2} \
  AB_CMD="timeout 100 python3 scripts/bench_mla_attention.py --batches ${BATCHES:-16,64,128} --ks ${KS:-0,3} --reps 30 --out \$RUN_OUT" \
  bash scripts/gpu_ab.sh > "$out/ab.log" 2>&1
status=$?
grep -E "^== tests|^version|dumped|passed|failed|ERROR SUMMARY" "$out/ab.log" | head -20
python3 $here/cmp_dumps.py /tmp/dumps | tee "$out/dumps.txt"
(cd "$out" && tar czf logs.tgz build.log rebuild_*.log environment.txt test_*.log 2>/dev/null && rm -f build.log rebuild_*.log environment.txt test_*.log)
python3 scripts/ab_table.py "$out/runs.tgz" | tee "$out/ab_table.txt"
exit $status
