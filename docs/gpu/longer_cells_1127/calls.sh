#!/usr/bin/env bash
# The device calls behind this folder, one stage per call (each builds first; SHAREGPT: the held-out ShareGPT JSON):
#   bash docs/gpu/longer_cells_1127/calls.sh tests sweep_t15 | trace sweep_greedy | offline | kernels | launches |
#        instances | t15_alone | sweep_greedy_small
set -uo pipefail
: "${SHAREGPT:?the ShareGPT JSON (held-out split) to sample prompts from}"
STAGES=none bash scripts/gpu_check.sh > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
d=docs/gpu/longer_cells_1127

sweep() {  # out-dir, then bench_mtp_sweep.py's own arguments
  local dir=$1; shift
  python3 scripts/bench_mtp_sweep.py --adaptive-k-max 3 --min-prompts 48 --prompts-factor 8 --dataset-name sharegpt \
    --dataset-path $SHAREGPT --sharegpt-split held-out --ignore-eos --sharegpt-max-total-len 2000 --disable-tqdm \
    --out-dir $OUT/$dir "$@" -- --devices cuda:0 --dtype bfloat16 > $OUT/$dir.log 2>&1
  rm -rf $OUT/$dir/raw; tar czf $OUT/$dir.tgz -C $OUT $dir && rm -rf $OUT/$dir
}
offline() {  # out-file, then bench_offline.py's own arguments
  local out=$1; shift
  python3 scripts/bench_offline.py --devices cuda:0 --dtype bfloat16 --adaptive-k-max 3 --batch-sizes 1 8 32 64 \
    --repeats 9 --max-tokens 256 --out $OUT/$out "$@" | grep '^|'
}
serve() {  # method port: prints the server's pid
  local extra=""; [ $1 = adaptive ] && extra="--num_speculative_tokens 3 --speculative_policy adaptive"
  python3 -m mtpserve.cli serve --devices cuda:0 --dtype bfloat16 --port $2 $extra > $OUT/server_$1_$2.log 2>&1 &
  echo $!
  for i in $(seq 120); do curl -sf localhost:$2/health > /dev/null && return; sleep 1; done
}
bench() {  # label port concurrency
  local n=$(( $3 * 24 )); [ $n -lt 48 ] && n=48
  python3 -m mtpserve.cli bench --base-url http://127.0.0.1:$2 --dataset-name sharegpt --dataset-path $SHAREGPT \
    --sharegpt-split held-out --num-prompts $n --max-concurrency $3 --temperature 1.5 --ignore-eos --disable-tqdm > /tmp/b.txt 2>&1
  printf "%-28s c=%-2s TPOT %s ms  out tok/s %s\n" "$1" $3 "$(grep 'Mean TPOT' /tmp/b.txt | awk '{print $NF}')" \
    "$(grep 'Output token throughput' /tmp/b.txt | awk '{print $NF}')"
}

for stage in "$@"; do
  case $stage in
    tests) timeout 200 python3 -m pytest -q -p no:cacheprovider -m cuda -rfE --continue-on-collection-errors tests/ \
             > $OUT/gpu_tests.txt 2>&1; tail -1 $OUT/gpu_tests.txt ;;
    sweep_t15) sweep sweep_t15 --ks 0 --concurrencies 1,2,4,8,16,32,64,80 --repeats 3 --temperature 1.5 ;;
    sweep_greedy) sweep sweep_greedy_c16_80 --ks 0,1,2,3 --concurrencies 16,32,64,80 --repeats 5 --temperature 0 ;;
    sweep_greedy_small) sweep sweep_greedy_c1_8 --ks 0,1,2,3 --concurrencies 1,2,4,8 --repeats 3 --temperature 0 ;;
    trace) python3 scripts/trace_adaptive_steps.py --devices cuda:0 --dtype bfloat16 --batch 64 --temperature 1.5 \
             --against-k0 --runs 6 --short | grep -v Loading | tee $OUT/trace_t15_b64.txt ;;
    offline) offline offline_adaptive_gpu_r9.json --ks 0 1 2 3
             offline offline_adaptive_gpu_t15_r9.json --ks 0 --temperature 1.5 ;;
    kernels|launches) python3 $d/k0_step_profile.py $stage 2>&1 | grep -v Loading | tee $OUT/$stage.txt ;;
    instances)  # three processes; the last pinned to the GPU's CPUs (all 16: the machine has one NUMA node)
      { nvidia-smi topo -m; lscpu | grep -i -E "numa|model name|^cpu\(s\)|socket"; } > $OUT/topology.txt 2>&1
      for run in free free2 taskset; do
        pin=""; [ $run = taskset ] && pin="taskset -c 0-15"
        $pin python3 $d/k0_step_profile.py instances 2>&1 | grep ms/step | sed "s/^/$run /"
      done | tee $OUT/instances.txt ;;
    t15_alone)
      for round in 1 2; do
        for m in baseline adaptive; do
          pid=$(serve $m 8011); bench "warm-up" 8011 2 > /dev/null
          for c in 2 4 8; do bench "alone r$round $m" 8011 $c; done
          kill $pid; wait $pid 2>/dev/null
        done
      done | tee $OUT/t15_alone.txt
      b=$(serve baseline 8021); a=$(serve adaptive 8022)
      bench "warm-up" 8021 2 > /dev/null; bench "warm-up" 8022 2 > /dev/null
      for c in 2 4 8; do
        bench "together baseline" 8021 $c; bench "together adaptive" 8022 $c
        bench "together adaptive" 8022 $c; bench "together baseline" 8021 $c
      done | tee $OUT/t15_together.txt
      kill $a $b; wait 2>/dev/null ;;
  esac
done
