#!/usr/bin/env bash
# Build, the graph tests, then serving with --enable_prefill_graph true vs false (same build): one server per (flag, method),
# a warm-up, then c = 32 and 64. Ran on the first try (whole graphs per ragged shape) and on the piecewise graphs of 42c9da4.
set -uo pipefail
: "${SHAREGPT:?the ShareGPT JSON (held-out split) to sample prompts from}"
start=$(date +%s)
STAGES=test TESTS="tests/test_cuda_graphs.py tests/test_eager_rows.py tests/test_cuda_deferred_fill.py tests/test_batch_invariance.py tests/test_cuda_engine.py" bash scripts/gpu_check.sh > $OUT/test_stage.log 2>&1
echo "tests done in $(( $(date +%s) - start )) s"; tail -1 $OUT/pytest.log; grep -E "^(FAILED|ERROR)|Error|error" $OUT/pytest.log | head -20
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
port=8123; res=$OUT/ab; mkdir -p $res
m() { curl -s http://127.0.0.1:$port/metrics | awk -v n="$1" '$1 ~ "^"n"(\\{|$)" {s+=$2} END {print s+0}'; }
for round in 1; do
  for variant in true false; do
    for method in "0 fixed" "3 adaptive"; do
      set -- $method
      python3 -m mtpserve.cli serve --port $port --num_speculative_tokens $1 --speculative_policy $2 --devices cuda:0 --dtype bfloat16 --enable_prefill_graph $variant > $res/server_${variant}_k$1.log 2>&1 &
      pid=$!
      for i in $(seq 180); do curl -sf http://127.0.0.1:$port/health > /dev/null && break; sleep 1; done
      python3 -m mtpserve.cli bench --port $port --dataset-name sharegpt --dataset-path $SHAREGPT --sharegpt-split held-out \
          --ignore-eos --sharegpt-max-total-len 2000 --num-prompts 64 --max-concurrency 16 --num-warmups 0 --disable-tqdm > /dev/null 2>&1
      for c in 32 64; do
        f=$res/bench_${variant}_r${round}_k$1_c$c.txt
        s0=$(m mtpserve:engine_step_seconds_total); p0=$(m mtpserve:engine_prompt_step_seconds_total); q0=$(m mtpserve:engine_prompt_steps_total)
        python3 -m mtpserve.cli bench --port $port --dataset-name sharegpt --dataset-path $SHAREGPT --sharegpt-split held-out \
          --ignore-eos --sharegpt-max-total-len 2000 --num-prompts $((c * 6)) --max-concurrency $c --num-warmups 0 --disable-tqdm > $f 2>&1
        s1=$(m mtpserve:engine_step_seconds_total); p1=$(m mtpserve:engine_prompt_step_seconds_total); q1=$(m mtpserve:engine_prompt_steps_total)
        dur=$(grep "Benchmark duration" $f | awk -F: '{print $2}')
        echo "prefill_graph=$variant k=$1 c=$c: $(grep -E 'Output token throughput|Mean TTFT|Mean TPOT' $f | awk -F: '{printf "%s=%s |", $1, $2}' | sed 's/Output token throughput (tok\/s)/tok\/s/' | tr -s ' ')"
        python3 -c "d=$dur; print(f'     engine busy {($s1-$s0)/d:.0%}; prompt steps {($p1-$p0)/d:.0%} of the run, {$q1-$q0:.0f} steps, mean {1e3*($p1-$p0)/max($q1-$q0,1):.2f} ms')"
      done
      kill $pid; wait $pid 2>/dev/null
      echo "  ($(( $(date +%s) - start )) s)"
    done
  done
done
tar czf $OUT/ab.tgz -C $OUT ab && rm -rf $res
