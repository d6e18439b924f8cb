#!/usr/bin/env bash
# 2026-12-02, fifty-ninth session, on one H200 (carry .whl and .ab). The tree (A, as f166bde: every thread's share of
# the Q tile, thread 0's included, is copied before thread 0 starts the first two KV tiles' copies) against main's
# kernel file (.ab/main: `git show 28db75d:cpp/kernels/cuda/mla_attention_wgmma.cu`) and against A with the split
# partials stored 16 bytes at a time (.ab/vec_store: mla_attention_tile.cuh with vec_store.patch). scripts/gpu_ab.sh
# builds all three, dumps each one's outputs on fixed inputs, runs the attention tests against A and vec_store, then
# times A B C twice at B = 1, 16 and 64, k = 0 and 3 (context 8192), with each call's kernels (--breakdown).
set -uo pipefail
cd "$(dirname "$0")/../../.."
VARIANTS=".ab/main .ab/vec_store" PYTEST_VERSIONS="A vec_store" ROUNDS=2 BENCH_ARGS=--breakdown \
  bash docs/gpu/attention_1202_fiftyninth/ab.sh
