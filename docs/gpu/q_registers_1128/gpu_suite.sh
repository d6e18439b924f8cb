# The GPU suite on the code of 0623e11, two device calls on one lent H200 (carry .whl):
# 1) the whole suite, memcheck over the attention tests, and the attention benchmark:
STAGES=test bash scripts/gpu_check.sh 2>&1 | tail -30
export PYTHONPATH=/tmp/site PATH=/usr/local/cuda/bin:$PATH
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m pytest -q -p no:cacheprovider -x -m cuda \
  tests/test_cuda_attention.py -k "not long" > "$OUT/sanitizer.log" 2>&1; tail -3 "$OUT/sanitizer.log"
timeout 200 python3 scripts/bench_mla_attention.py --out "$OUT" 2>&1 | tail -22
# 2) (httpx2 and opentelemetry-api wheels added) the files that did not collect or failed in 1), and the adaptive
#    stage (offline, greedy and temperature 1.5):
# STAGES="test adaptive" TESTS="<those files> tests/test_cuda_engine.py" bash scripts/gpu_check.sh
