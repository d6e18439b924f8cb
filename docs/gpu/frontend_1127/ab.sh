#!/usr/bin/env bash
# The server's Python before (BASE, default f91f0c4) and after (the working tree): same build, same GPU, interleaved twice;
# k = 0 at c = 32 and 64, adaptive (k_max 3) at c = 64; ShareGPT held-out prompts with the reference lengths ($SHAREGPT).
# Only these Python files differ between the two; both run on the working tree's C++ (run on the lent GPU, $OUT set).
set -uo pipefail
cd "$(dirname "$0")/../../.."
files="server/choices.py output_processor.py server/async_engine.py llm.py"
mkdir -p /tmp/ab_py/old /tmp/ab_py/new
for f in $files; do
  git show ${BASE:-f91f0c4}:python/mtpserve/$f > /tmp/ab_py/old/${f//\//_}; cp python/mtpserve/$f /tmp/ab_py/new/${f//\//_}
done
STAGES=none bash scripts/gpu_check.sh > /tmp/build.log 2>&1 || { tail -20 /tmp/build.log; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
port=8123; res=$OUT/ab; mkdir -p $res
m() { curl -s http://127.0.0.1:$port/metrics | awk -v n="$1" '$1 ~ "^"n"(\\{|$)" {s+=$2} END {print s+0}'; }
use() { for f in $files; do cp /tmp/ab_py/$1/${f//\//_} python/mtpserve/$f; done; }
for round in 1 2; do
  for variant in new old; do
    use $variant
    for method in "0 fixed" "3 adaptive"; do
      set -- $method
      python3 -m mtpserve.cli serve --port $port --num_speculative_tokens $1 --speculative_policy $2 --devices cuda:0 --dtype bfloat16 > $res/server.log 2>&1 &
      pid=$!
      for i in $(seq 180); do curl -sf http://127.0.0.1:$port/health > /dev/null && break; sleep 1; done
      python3 -m mtpserve.cli bench --port $port --dataset-name random --random-input-len 64 --random-output-len 64 --num-prompts 32 \
        --max-concurrency 16 --disable-tqdm > /dev/null 2>&1
      cs="32 64"; [ $1 = 3 ] && cs="64"
      for c in $cs; do
        f=$res/bench_${variant}_r${round}_k$1_c$c.txt
        s0=$(m mtpserve:engine_step_seconds_total); t0=$(m mtpserve:time_to_first_token_seconds_sum); n0=$(m mtpserve:time_to_first_token_seconds_count)
        c0=$(awk '{print $14+$15}' /proc/$pid/task/$pid/stat)
        python3 -m mtpserve.cli bench --port $port --dataset-name sharegpt --dataset-path ${SHAREGPT:?held-out ShareGPT JSON} --sharegpt-split held-out \
          --ignore-eos --sharegpt-max-total-len 2000 --num-prompts $((c * 6)) --max-concurrency $c --num-warmups 0 --disable-tqdm > $f 2>&1
        s1=$(m mtpserve:engine_step_seconds_total); t1=$(m mtpserve:time_to_first_token_seconds_sum); n1=$(m mtpserve:time_to_first_token_seconds_count)
        c1=$(awk '{print $14+$15}' /proc/$pid/task/$pid/stat)
        dur=$(grep "Benchmark duration" $f | awk -F: '{print $2}')
        echo "$variant r$round k=$1 c=$c: $(grep -E 'Output token throughput|Mean TTFT|Mean TPOT|tokens per chunk' $f | awk -F: '{printf "%s=%s |", $1, $2}' | sed 's/Output token throughput (tok\/s)/tok\/s/; s/Mean tokens per chunk/chunk/' | tr -s ' ')"
        python3 -c "d=$dur; print(f'     engine busy {($s1-$s0)/d:.0%}; server TTFT {1e3*($t1-$t0)/max($n1-$n0,1):.1f} ms; main thread CPU {($c1-$c0)/100/d:.0%}')"
      done
      kill $pid; wait $pid 2>/dev/null
    done
  done
done
use new
