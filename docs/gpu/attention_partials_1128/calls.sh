#!/usr/bin/env bash
# The device call behind this folder (carry .whl and .ab), on a lent H100:
#   git apply docs/gpu/attention_partials_1128/bf16_partials.patch   # version A: split partials in q's dtype
#   (.ab/old holds version B: the same four files under cpp/kernels/cuda/ as of d7765d5, fp32 partials)
#   bash docs/gpu/attention_partials_1128/calls.sh
# A B A B in one call, with the attention kernel tests once against each version (ab/test_A.log, ab/test_B.log).
# The timings are in ab/h100_ab_runs.tgz (A1, B1, A2, B2). The patch was not kept: docs/benchmarks.md says why.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
mkdir -p $OUT/ab
OUT=$OUT/ab AB_VARIANT=.ab/old \
  AB_TEST='timeout 150 python3 -m pytest -q -p no:cacheprovider -m cuda tests/test_cuda_attention.py' \
  AB_CMD='python3 scripts/bench_mla_attention.py --batches 1,16,64 --reps 30 --out $RUN_OUT' \
  bash scripts/gpu_ab.sh
