# Server-side CPU per streamed token: one k = 0 server on this CPU (float32), random prompts of 64 tokens, 128
# output tokens each, at c = 16 and 64; CPU time of each server thread (/proc) over the run, per generated token.
set -u
cd "$(dirname "$0")/../../.."
port=57411
.venv/bin/python -m mtpserve.cli serve --port $port --num_speculative_tokens 0 --dtype float32 > ${OUT_DIR:-/tmp}/loop_server.log 2>&1 &
pid=$!
for i in $(seq 120); do curl -sf http://127.0.0.1:$port/health > /dev/null && break; sleep 1; done
snap() { for t in /proc/$pid/task/*; do echo "$(basename $t) $(awk '{print $14+$15}' $t/stat)"; done | sort -n; }
gen() { curl -s http://127.0.0.1:$port/metrics | grep -E '^mtpserve:generation_tokens_total' | awk '{print $2}'; }
B=".venv/bin/python -m mtpserve.cli bench --port $port --dataset-name random --random-input-len 64 --random-output-len 128 --ignore-eos --disable-tqdm"
$B --num-prompts 16 --max-concurrency 16 > /dev/null 2>&1
for c in 16 64; do
  snap > ${OUT_DIR:-/tmp}/loop_before.txt; g0=$(gen)
  $B --num-prompts $c --max-concurrency $c > ${OUT_DIR:-/tmp}/loop_bench_$c.txt 2>&1
  snap > ${OUT_DIR:-/tmp}/loop_after.txt; g1=$(gen)
  echo "c=$c tokens $(python3 -c "print(int($g1-$g0))") $(grep -E 'duration|Output token|Client CPU' ${OUT_DIR:-/tmp}/loop_bench_$c.txt | awk -F: '{printf "%s |", $2}' | tr -s ' ')"
  join ${OUT_DIR:-/tmp}/loop_before.txt ${OUT_DIR:-/tmp}/loop_after.txt | awk -v pid=$pid -v tok=$(python3 -c "print($g1-$g0)") '{d=$3-$2; if (d>0) printf "  tid %s%s: %.2f s CPU, %.1f us/token\n", $1, ($1==pid?" (main: event loop)":""), d/100, d/100/tok*1e6}'
done
kill $pid; wait $pid 2>/dev/null
