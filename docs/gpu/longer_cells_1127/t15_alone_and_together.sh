#!/usr/bin/env bash
# Temperature 1.5 serving, k = 0 vs adaptive k_max = 3 at c = 2, 4, 8: one server alive at a time (two rounds), then
# both alive together as bench_mtp_sweep runs them (one round).
set -uo pipefail
start=$(date +%s)
: "${SHAREGPT:?the ShareGPT JSON (held-out split) to sample prompts from}"
STAGES=none bash scripts/gpu_check.sh > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
echo "built at $(( $(date +%s) - start )) s"
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
serve() {  # method port
  local extra=""; [ $1 = adaptive ] && extra="--num_speculative_tokens 3 --speculative_policy adaptive"
  python3 -m mtpserve.cli serve --devices cuda:0 --dtype bfloat16 --port $2 $extra > $OUT/server_$1_$2.log 2>&1 &
  echo $!
}
healthy() { for i in $(seq 120); do curl -sf localhost:$1/health > /dev/null && return 0; sleep 1; done; return 1; }
bench() {  # label port c
  local n=$(( $3 * 24 )); [ $n -lt 48 ] && n=48
  python3 -m mtpserve.cli bench --base-url http://127.0.0.1:$2 --dataset-name sharegpt --dataset-path $SHAREGPT \
    --sharegpt-split held-out --num-prompts $n --max-concurrency $3 --temperature 1.5 --ignore-eos --disable-tqdm > /tmp/b.txt 2>&1
  printf "%-28s c=%-2s TPOT %s ms  out tok/s %s\n" "$1" $3 "$(grep 'Mean TPOT' /tmp/b.txt | awk '{print $NF}')" \
    "$(grep 'Output token throughput' /tmp/b.txt | awk '{print $NF}')"
}
for round in 1 2; do
  for m in baseline adaptive; do
    pid=$(serve $m 8011); healthy 8011 || { echo "$m not healthy"; tail -5 $OUT/server_${m}_8011.log; exit 1; }
    bench "warm-up" 8011 2 > /dev/null
    for c in 2 4 8; do bench "alone r$round $m" 8011 $c; done
    kill $pid; wait $pid 2>/dev/null
  done
done | tee $OUT/alone.txt
b=$(serve baseline 8021); a=$(serve adaptive 8022); healthy 8021; healthy 8022
bench "warm-up" 8021 2 > /dev/null; bench "warm-up" 8022 2 > /dev/null
for c in 2 4 8; do bench "together baseline" 8021 $c; bench "together adaptive" 8022 $c; bench "together adaptive" 8022 $c; bench "together baseline" 8021 $c; done | tee $OUT/together.txt
kill $a $b; wait 2>/dev/null
echo "done at $(( $(date +%s) - start )) s"
