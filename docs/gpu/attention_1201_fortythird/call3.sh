#!/usr/bin/env bash
# 2026-12-01, forty-third session, call 3 on one H200 (carry .whl; .ab/* are untracked and travel with the tree):
# where the grid combine's time goes. A: the tree with grid_combine.diff applied (a cooperative launch); B: main's
# kernel (.ab/main, as in call1.sh); C: .ab/nocoop/cpp/kernels/cuda/mla_attention_wgmma.cu, A's file with the
# cooperative attribute left off (`config.attrs = nullptr; config.numAttrs = 0;` in its place: the blocks are all
# resident only because nothing else runs; not shippable). A B C A B C at B = 1 and 16, k = 0 and 3.
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp/mtpserve-ab}
AB_VARIANTS=".ab/main .ab/nocoop" \
  AB_CMD="timeout 100 python3 scripts/bench_mla_attention.py --batches 1,16 --ks 0,3 --reps 30 --out \$RUN_OUT" \
  bash scripts/gpu_ab.sh > "$out/ab.log" 2>&1
status=$?
(cd "$out" && tar czf logs.tgz build.log rebuild_*.log environment.txt && rm -f build.log rebuild_*.log environment.txt)
python3 scripts/ab_table.py "$out/runs.tgz" | tee "$out/ab_table.txt"
exit $status
