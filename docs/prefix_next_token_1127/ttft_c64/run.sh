# One server per method (k = 0, fixed k = 1, adaptive k_max = 3), 64 ShareGPT prompts at concurrency 64 sent four
# times (seeds 1, 1 again, 2, 3: the second send repeats the first's prompts); CPU, float32, embedded model.
set -u
cd "$(dirname "$0")/../../.."
out=${OUT_DIR:-docs/prefix_next_token_1127/ttft_c64}
for method in "0 fixed" "1 fixed" "3 adaptive"; do
  set -- $method
  k=$1 policy=$2 port=$((57100 + $1))
  .venv/bin/python -m mtpserve.cli serve --port $port --num_speculative_tokens $k --speculative_policy $policy --dtype float32 > /tmp/ttft_server_$k.log 2>&1 &
  pid=$!
  for i in $(seq 120); do curl -sf http://127.0.0.1:$port/health > /dev/null && break; sleep 1; done
  for run in "1 a" "1 b" "2 c" "3 d"; do
    set -- $run
    .venv/bin/python -m mtpserve.cli bench --port $port --num-prompts 64 --max-concurrency 64 --seed $1 --dataset-name sharegpt --dataset-path .scratch2/sharegpt_heldout.json --sharegpt-split held-out --ignore-eos --sharegpt-max-total-len 768 --disable-tqdm > $out/ttft_${k}_$2.txt 2>&1
    echo "k=$k $policy seed=$1 ($2): $(grep -E 'Mean TTFT|Mean TPOT' $out/ttft_${k}_$2.txt | tr -s ' ' | tr '\n' ' ')"
  done
  curl -s http://127.0.0.1:$port/metrics | grep -E "^mtpserve:prefix_cache_(hits|queries)"
  kill $pid; wait $pid 2>/dev/null
done
