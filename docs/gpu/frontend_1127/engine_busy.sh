#!/usr/bin/env bash
# Where the time goes when serving at c = 32 / 64 on the GPU: engine busy (step seconds / elapsed), prompt steps, the
# server's main-thread CPU, the bench's numbers; k = 0 and adaptive (k_max 3), ShareGPT held-out with the reference lengths.
set -uo pipefail
STAGES=none bash scripts/gpu_check.sh > /tmp/build.log 2>&1 || { tail -20 /tmp/build.log; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
port=8123
m() { curl -s http://127.0.0.1:$port/metrics | awk -v n="$1" '$1 ~ "^"n"(\\{|$)" {print $2}'; }
for method in "0 fixed" "3 adaptive"; do
  set -- $method
  python3 -m mtpserve.cli serve --port $port --num_speculative_tokens $1 --speculative_policy $2 --devices cuda:0 --dtype bfloat16 > $OUT/server_$1.log 2>&1 &
  pid=$!
  for i in $(seq 180); do curl -sf http://127.0.0.1:$port/health > /dev/null && break; sleep 1; done
  python3 -m mtpserve.cli bench --port $port --dataset-name random --random-input-len 64 --random-output-len 64 --num-prompts 32 \
    --max-concurrency 16 --disable-tqdm > /dev/null 2>&1
  for c in ${CS:-32 64 64}; do
    n=$((c * 6)); [ $n -lt 48 ] && n=48
    s0=$(m mtpserve:engine_step_seconds_total); p0=$(m mtpserve:engine_prompt_step_seconds_total); q0=$(m mtpserve:engine_prompt_steps_total); st0=$(m mtpserve:engine_steps_total)
    c0=$(awk '{print $14+$15}' /proc/$pid/task/$pid/stat); a0=$(awk '{print $14+$15}' /proc/$pid/stat)
    python3 -m mtpserve.cli bench --port $port --dataset-name sharegpt --dataset-path ${SHAREGPT:?held-out ShareGPT JSON} --sharegpt-split held-out \
      --ignore-eos --sharegpt-max-total-len 2000 --num-prompts $n --max-concurrency $c --num-warmups 0 --disable-tqdm > $OUT/bench_$1_$c.txt 2>&1
    s1=$(m mtpserve:engine_step_seconds_total); p1=$(m mtpserve:engine_prompt_step_seconds_total); q1=$(m mtpserve:engine_prompt_steps_total); st1=$(m mtpserve:engine_steps_total)
    c1=$(awk '{print $14+$15}' /proc/$pid/task/$pid/stat); a1=$(awk '{print $14+$15}' /proc/$pid/stat)
    dur=$(grep "Benchmark duration" $OUT/bench_$1_$c.txt | awk -F: '{print $2}')
    echo "k=$1 $2 c=$c: $(grep -E 'Output token throughput|Mean TTFT|Mean TPOT|tokens per chunk' $OUT/bench_$1_$c.txt | awk -F: '{printf "%s=%s |", $1, $2}' | tr -s ' ')"
    python3 -c "d=$dur; print(f'   duration {d:.2f} s; engine busy {($s1-$s0)/d:.0%} (prompt steps {($p1-$p0)/d:.0%}: {int($q1-$q0)} of {int($st1-$st0)} steps, mean {1e3*($p1-$p0)/max($q1-$q0,1):.2f} ms; other steps mean {1e3*($s1-$s0-$p1+$p0)/max($st1-$st0-$q1+$q0,1):.2f} ms); main thread CPU {($c1-$c0)/100/d:.0%}, process CPU {($a1-$a0)/100/d:.0%}')"
  done
  kill $pid; wait $pid 2>/dev/null
done
