# Piecewise prompt-step graphs captured at start-up instead of the first time each row count comes (2026-11-29,
# nineteenth session). Run on the lent GPU from the repository root with .whl and the held-out ShareGPT JSON carried
# (SHAREGPT). Builds, runs the graph tests, then serves c = 64 and 80 from one fresh k = 0 server (24 x c prompts, the
# eighth session's long cells), where a fresh server used to read c = 64 25% slower when it was its first cell.
set -uo pipefail
out=${OUT:-/tmp/x}
t0=$(date +%s); ts() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $out/check.txt; }
STAGES=none bash scripts/gpu_check.sh > $out/build.log 2>&1 || { tail -30 $out/build.log; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
ts built
timeout 90 python3 -m pytest -q -p no:cacheprovider -m cuda tests/test_cuda_graphs.py 2>&1 | tail -4 | tee -a $out/check.txt
ts tested
timeout 120 python3 scripts/bench_mtp_sweep.py --isolated --ks 0 --concurrencies 64,80 --repeats 1 --min-prompts 144 \
  --prompts-factor 24 --dataset-name sharegpt --dataset-path $SHAREGPT --sharegpt-split held-out --ignore-eos \
  --sharegpt-max-total-len 2000 --disable-tqdm --out-dir $out/sweep -- --devices cuda:0 --dtype bfloat16 \
  > $out/sweep.log 2>&1
grep -h "captured" $out/sweep/server_*.log | tee -a $out/check.txt
cat $out/sweep/results.md | tee -a $out/check.txt
rm -rf $out/sweep/raw
ts done
