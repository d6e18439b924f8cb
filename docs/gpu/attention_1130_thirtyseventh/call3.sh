#!/usr/bin/env bash
# 2026-11-30, thirty-seventh session, call 3 on one H200 (carry .whl; make_variants.sh first): what the cluster
# launch costs. A = the tree, B = nocluster, C = empty, D = empty_nocluster, timed A..D twice by scripts/gpu_ab.sh
# at B = 16 (8 splits: clusters of 8) and B = 64 (2 splits: clusters of 2); then cluster_launch.cu, the launch
# cost of empty blocks by cluster size and shared memory.
set -uo pipefail
cd "$(dirname "$0")/../../.."
here=docs/gpu/attention_1130_thirtyseventh
out=${OUT:-/tmp/mtpserve-ab}
AB_VARIANTS=".ab/nocluster .ab/empty .ab/empty_nocluster" \
  AB_CMD="timeout 100 python3 scripts/bench_mla_attention.py --batches ${BATCHES:-16,64} --ks ${KS:-0,3} --reps 30 --out \$RUN_OUT" \
  bash scripts/gpu_ab.sh > "$out/ab.log" 2>&1
status=$?
(cd "$out" && tar czf logs.tgz build.log rebuild_*.log environment.txt && rm -f build.log rebuild_*.log environment.txt)
nvcc -std=c++17 -O2 -arch=sm_90a -o /tmp/cluster_launch "$here/cluster_launch.cu" && /tmp/cluster_launch \
  | tee "$out/cluster_launch.txt"
python3 scripts/ab_table.py "$out/runs.tgz" | tee "$out/ab_table.txt"
exit $status
