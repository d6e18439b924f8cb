#!/usr/bin/env bash
# 2026-11-30, thirty-seventh session, call 2 on one H200 (carry .whl; make_variants.sh first): where B = 16's time
# goes beyond the KV bytes. A = the tree, then the diagnostics B = stream, C = stream_noq, D = stream_nocombine,
# E = stream_bare, F = empty (make_variants.sh says what each leaves out), timed A..F twice by scripts/gpu_ab.sh.
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp/mtpserve-ab}
AB_VARIANTS=".ab/stream .ab/stream_noq .ab/stream_nocombine .ab/stream_bare .ab/empty" \
  AB_CMD="timeout 100 python3 scripts/bench_mla_attention.py --batches ${BATCHES:-16,128} --ks ${KS:-0,3} --reps 30 --out \$RUN_OUT" \
  bash scripts/gpu_ab.sh > "$out/ab.log" 2>&1
status=$?
python3 scripts/ab_table.py "$out/runs.tgz" | tee "$out/ab_table.txt"
exit $status
