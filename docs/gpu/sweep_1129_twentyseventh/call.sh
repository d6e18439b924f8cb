#!/usr/bin/env bash
# The twenty-seventh session's device calls (lent H200s, torch 2.11.0+cu130, bf16; carry .whl), one stage each:
#   bash docs/gpu/sweep_1129_twentyseventh/call.sh one|two|three
# Together with the twenty-sixth session's cells (docs/gpu/seq_aging_1129/: greedy c = 8, 32, 80 and temperature 1.5
# c = 8, 64, on 8d5cefe, whose arithmetic this code keeps) they make the serving sweep at every concurrency on one
# policy: one server at a time, 24 x c prompts a cell and at least 144, 3 repeats, k = 0, fixed k = 3 and adaptive
# greedy, k = 0 and adaptive at temperature 1.5. SHAREGPT: the held-out ShareGPT JSON cut to each record's first two
# turns (what the benchmark reads).
#   one:   the bf16 batch-invariance greedy tests on the GPU (pytest_greedy.log), then greedy c = 1, 2, 4 (its last
#          round stopped at the time limit: k = 0 has 2 repeats, adaptive at c = 4 too)
#   two:   greedy c = 4, 16, 64, then temperature 1.5 c = 4
#   three: temperature 1.5 c = 1, 2, 16, 32, 80
#   four:  temperature 1.5 c = 8, 64, then greedy c = 8 (the device time left; greedy c = 32 and 80 stay the twenty-sixth
#          session's)
set -uo pipefail
: "${SHAREGPT:?the ShareGPT JSON (held-out split, two turns a record)}"
cd "$(dirname "$0")/../../.."
STAGES=none bash scripts/gpu_check.sh > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
sweep() {  # name, seconds allowed, then bench_mtp_sweep.py's own arguments
  local name=$1 seconds=$2; shift 2
  timeout "$seconds" python3 scripts/bench_mtp_sweep.py --isolated --adaptive-k-max 3 --repeats 3 --min-prompts 144 \
    --prompts-factor 24 --dataset-name sharegpt --dataset-path "$SHAREGPT" --sharegpt-split held-out --ignore-eos \
    --sharegpt-max-total-len 2000 --disable-tqdm --out-dir "$OUT/$name" "$@" -- --devices cuda:0 --dtype bfloat16 \
    > "$OUT/$name.log" 2>&1
  cat "$OUT/$name/results.md"; rm -rf "$OUT/$name/raw"; tar czf "$OUT/$name.tgz" -C "$OUT" "$name" && rm -rf "$OUT/$name"
}
case ${1:?stage} in
  one) timeout 150 python3 -m pytest -q -p no:cacheprovider -m cuda -rfE tests/test_batch_invariance.py -k greedy \
         > "$OUT/pytest_greedy.log" 2>&1; tail -3 "$OUT/pytest_greedy.log"
       sweep greedy_c1_4 300 --ks 0,3 --temperature 0 --concurrencies 1,2,4 ;;
  two) sweep greedy_c4_64 400 --ks 0,3 --temperature 0 --concurrencies 4,16,64
       sweep t15_c4 140 --ks 0 --temperature 1.5 --concurrencies 4 ;;
  three) sweep t15_c1_80 560 --ks 0 --temperature 1.5 --concurrencies 1,2,16,32,80 ;;
  four) sweep t15_c8_64 230 --ks 0 --temperature 1.5 --concurrencies 8,64
        sweep greedy_c8 150 --ks 0,3 --temperature 0 --concurrencies 8 ;;
esac
