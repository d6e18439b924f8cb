#!/usr/bin/env bash
# The four device calls behind this folder (2026-11-29, twenty-second session), on 6b1270e: the engine of the graphed
# MTP fill (e647e91) with the drafting's host-time counter (a10c522). One lent H200 for calls 1-3
# (environment.txt), another for call 4 (environment_offline.txt). SHAREGPT: the held-out ShareGPT JSON cut to two
# turns a record.
#   1. bf16 greedy MTP against k = 0 (docs/gpu/divergence_1128/calls.sh: the batch-invariance greedy tests, then
#      scripts/mtp_divergence.py with --batch-invariant under both policies and without it under adaptive;
#      divergence.txt, mtp_divergence_bfloat16_*.json), then a prompt step with and without MTP, one request at a time
#      (prompt_step_before_early_publish.md)
#   2. the serving sweep, greedy, c = 64 and 80: k = 0, fixed k = 3 and adaptive, 5 repeats (greedy_c64_80.tgz,
#      greedy_c64_80_results.md)
#   3. the serving sweep, temperature 1.5, c = 1, 2, 4, 8, 16 and 80: k = 0 and adaptive, 3 repeats
#      (t15_c1_16_80.tgz, t15_c1_16_80_results.md)
#   4. offline, STAGES=adaptive scripts/gpu_check.sh: greedy k = 0..3 and adaptive, temperature 1.5 k = 0, 3 and
#      adaptive, batch 1, 8, 32, 64, 3 interleaved repeats (offline_adaptive_gpu.json, offline_adaptive_gpu_t15.json)
# The results tables were rewritten from each sweep.json by `bench_mtp_sweep.py --replot` of 67b2b83 (paired columns).
set -uo pipefail
: "${SHAREGPT:?the ShareGPT JSON (held-out split) to sample prompts from}"
case ${1:?divergence, greedy_high, t15_rest or offline} in
  divergence) bash docs/gpu/divergence_1128/calls.sh | tee $OUT/divergence.txt
              bash docs/gpu/sweep_1129c/calls.sh prompt_step ;;
  greedy_high|t15_rest) bash docs/gpu/sweep_1129c/calls.sh $1 ;;
  offline) STAGES=adaptive bash scripts/gpu_check.sh ;;
esac
