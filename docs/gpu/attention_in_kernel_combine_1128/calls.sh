# Device calls of 2026-11-28 (fourteenth session), lent H200s (kind nvidia-h200), carry [".whl", ...].
# 1. The per-block timeline of the fused call before the change (code of 2711c47 plus timeline_instrumentation.patch,
#    which records globaltimer per block into a buffer whose address timeline.py passes in $MLA_TL_PTR):
git apply docs/gpu/attention_in_kernel_combine_1128/timeline_instrumentation.patch
STAGES=none bash scripts/gpu_check.sh && PYTHONPATH=/tmp/site python3 docs/gpu/attention_in_kernel_combine_1128/timeline.py
#    (bench_before_h200.txt: the uninstrumented bench_mla_attention.py --batches 16,64,128 --ks 0,3 --reps 30 on
#    the first machine of the session, before the instrumented build)
# 2-4. A/B, A = the in-kernel combine (three successive versions), B = the combine kernel of 2711c47 (files in
#    .ab/base), A B A B in one call each; the attention tests and memcheck on A first:
AB_VARIANT=.ab/base \
AB_TEST='timeout 240 python3 -m pytest -q -p no:cacheprovider -x tests/test_cuda_attention.py tests/test_batch_invariance.py -k "attention or split or graph"; timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m pytest -q -p no:cacheprovider -x tests/test_cuda_attention.py -k "split or past_the_context"' \
AB_CMD='python3 scripts/bench_mla_attention.py --batches 1,16,64 --reps 20 --out $RUN_OUT' bash scripts/gpu_ab.sh
# 3b. Phases of the second version, cooperative launch on and off: timeline2_phases.py on that version with its
#    own globaltimer records (not kept as a patch: that version is not in git).
# 5. The GPU suite on the kept code (92d11fd before its MPS fallback and comment edits):
STAGES=test bash scripts/gpu_check.sh
# 6. The committed code (A) against 2711c47 (B, .ab/base) at B = 1 and 16, where it keeps the combine kernel:
AB_VARIANT=.ab/base AB_CMD='python3 scripts/bench_mla_attention.py --batches 1,16 --ks 0,3 --reps 20 --out $RUN_OUT' \
  bash scripts/gpu_ab.sh
