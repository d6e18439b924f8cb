set -u
cd /work/main
for k in 0 1; do
  port=$((57100 + k))
  .venv/bin/python -m mtpserve.cli serve --port $port --num_speculative_tokens $k --speculative_policy fixed --dtype float32 > /tmp/ttft_server_$k.log 2>&1 &
  pid=$!
  for i in $(seq 120); do curl -sf http://127.0.0.1:$port/health > /dev/null && break; sleep 1; done
  for run in "1 a" "1 b" "2 c" "3 d"; do
    set -- $run
    .venv/bin/python -m mtpserve.cli bench --port $port --num-prompts 64 --max-concurrency 64 --seed $1 --dataset-name sharegpt --dataset-path .scratch2/sharegpt_heldout.json --sharegpt-split held-out --ignore-eos --sharegpt-max-total-len 768 --disable-tqdm > /tmp/ttft_${k}_$2.txt 2>&1
    echo "k=$k seed=$1 ($2): $(grep -E 'Mean TTFT|Mean TPOT' /tmp/ttft_${k}_$2.txt | tr -s ' ' | tr '\n' ' ')"
  done
  curl -s http://127.0.0.1:$port/metrics | grep -E "^mtpserve:prefix_cache_(hits|queries)" 
  kill $pid; wait $pid 2>/dev/null
done
