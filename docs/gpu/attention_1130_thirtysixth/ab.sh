#!/usr/bin/env bash
# 2026-11-30, thirty-sixth session: the kernel of the tree (64-token tiles, part-wise reloads, the two softmaxes
# in a chain) against the one before (its files under .ab/old, as `git show 91ee484:<path>` wrote them), on one
# H200 (carry .whl). Builds both, runs tests.sh on the tree's kernel, then times A B A B.
#   BATCHES=16,64,128 KS=0,3 bash docs/gpu/attention_1130_thirtysixth/ab.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
AB_VARIANT=.ab/old AB_TEST="bash docs/gpu/attention_1130_thirtysixth/tests.sh" \
  AB_CMD="python3 scripts/bench_mla_attention.py --batches ${BATCHES:-16,64,128} --ks ${KS:-0,3} --reps 30 --out \$RUN_OUT" \
  bash scripts/gpu_ab.sh
