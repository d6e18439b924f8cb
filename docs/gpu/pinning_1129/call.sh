#!/usr/bin/env bash
# The twenty-eighth session's device calls (lent H200, torch 2.11.0+cu130, bf16; carry .whl), one stage each:
#   SHAREGPT=<held-out ShareGPT JSON cut to two turns, or it gzipped> bash docs/gpu/pinning_1129/call.sh one|two|three
# Is a slow server instance one whose engine thread shares a core? Every sweep here records each instance's busiest
# threads and the CPU each last ran on (bench_mtp_sweep.py's per-repeat table), and the host's physical cores.
#   one:   greedy c = 16 and 80 with k = 0, fixed k = 3 and
#          adaptive, 3 repeats, unpinned (the cells that missed 0.95 of fixed k = 3 in the last two sessions)
#   two:   the GPU test suite (GPU_STAGES=test: gpu_check.sh's test stage), then the same cells with the benchmark
#          client on two physical cores of its own (--client-cores 2), then a traced adaptive server at c = 16
#   three: CLIENT_CORES (unset: unpinned) greedy at CONCURRENCIES with k = 0, fixed KS and adaptive, named NAME;
#          with GPU_STAGES=test the GPU test suite first. Run on the code that plans ahead (the GPU default since):
#            GPU_STAGES=test NAME=ahead_c16_80 CONCURRENCIES=16,80 SECONDS_ALLOWED=320 ... call.sh three
set -uo pipefail
: "${SHAREGPT:?the ShareGPT JSON (held-out split, two turns a record)}"
cd "$(dirname "$0")/../../.."
case $SHAREGPT in *.gz) gunzip -c "$SHAREGPT" > /tmp/sharegpt.json && SHAREGPT=/tmp/sharegpt.json ;; esac
STAGES=${GPU_STAGES:-none} bash scripts/gpu_check.sh > "$OUT/gpu_check.log" 2>&1
grep -E "passed|failed|error|diverged|seconds" "$OUT/gpu_check.log" | tail -8
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
python3 -c "import mtpserve._C" || { tail -30 "$OUT/gpu_check.log"; exit 1; }
grep . /sys/devices/system/cpu/cpu*/topology/thread_siblings_list > "$OUT/siblings.txt"
sweep() {  # name, seconds allowed, then bench_mtp_sweep.py's own arguments
  local name=$1 seconds=$2; shift 2
  timeout "$seconds" python3 scripts/bench_mtp_sweep.py --isolated --adaptive-k-max 3 --repeats 3 --min-prompts 144 \
    --prompts-factor 24 --dataset-name sharegpt --dataset-path "$SHAREGPT" --sharegpt-split held-out --ignore-eos \
    --sharegpt-max-total-len 2000 --disable-tqdm --temperature 0 --out-dir "$OUT/$name" "$@" \
    -- --devices cuda:0 --dtype bfloat16 > "$OUT/$name.log" 2>&1
  cat "$OUT/$name/results.md"; rm -rf "$OUT/$name/raw"; tar czf "$OUT/$name.tgz" -C "$OUT" "$name" && rm -rf "$OUT/$name"
}
case ${1:?stage} in
  one) sweep unpinned_c16_80 380 --ks 0,3 --concurrencies 16,80 ;;
  two) sweep pinned_c16_80 300 --ks 0,3 --concurrencies 16,80 --client-cores 2
       # Then every adaptive plan's kind (warm-up, probe, estimate), k and estimated time per token at each k, in
       # the server log (plan_trace.patch, not landed): fixed k = 3 and adaptive at c = 16, one repeat, pinned.
       git apply docs/gpu/pinning_1129/plan_trace.patch && python3 -m pip install --no-build-isolation --no-deps -e . \
         > /tmp/build_trace.log 2>&1 || { tail -20 /tmp/build_trace.log; exit 1; }
       MTP_TRACE=1 sweep traced_c16 150 --ks 3 --concurrencies 16 --repeats 1 --client-cores 2 ;;
  three) sweep "greedy_${NAME:?}" "${SECONDS_ALLOWED:-500}" --ks "${KS:-0,3}" --concurrencies "${CONCURRENCIES:?}" \
           ${CLIENT_CORES:+--client-cores "$CLIENT_CORES"} ;;
esac
