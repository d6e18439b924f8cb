# What the attention A/B calls share (sourced by the scripts beside it, in ../cluster_combine_1128,
# ../dependent_combine_1128 and in the 2026-11-29 folders ../*_1129; run on the lent GPU from the repository root
# with .whl, .tl and .ab carried).
# The calls ran their steps as standalone scripts; they are restated here over one shared preamble, same commands.
# The tree as sent holds the new version; .ab/<name>/ holds each other version of $FILES. dump_attn.py and
# cmp_attn.py are the ones in ../q_registers_1128 (as .tl/).
set -uo pipefail
out=${OUT:-/tmp/x}
t0=$(date +%s); ts() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $out/exp.txt; }
STAGES=none bash scripts/gpu_check.sh > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
cat $out/environment.txt
export PYTHONPATH=/tmp/site PATH=/usr/local/cuda/bin:$PATH CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)
use() {  # use NAME: put .ab/NAME's version of $FILES in place and rebuild
  for f in $FILES; do cp .ab/$1/$f $f; done
  python3 -m pip install --no-build-isolation --no-deps -e . > /tmp/rebuild.log 2>&1 || { tail -30 /tmp/rebuild.log; exit 1; }
  ts "built $1"
}
bench() {  # bench NAME RUN [extra options]: the attention benchmark at $BATCHES, k = 0..3
  ts "bench $1"
  python3 scripts/bench_mla_attention.py --batches $BATCHES --ks 0,1,2,3 --reps 20 ${3:-} --out /tmp/e > /tmp/e.txt 2>&1
  grep -E "copy|^\| [0-9]" /tmp/e.txt | tee -a $out/exp.txt
  cp /tmp/e/mla_attention.json $out/mla_attention_$1_$2.json 2>/dev/null
  cp /tmp/e.txt $out/bench_$1_$2.txt
}
attention_tests() { timeout 200 python3 -m pytest -q -p no:cacheprovider -m cuda tests/test_cuda_attention.py 2>&1 | tail -2 | tee -a $out/exp.txt; }
dump() { python3 .tl/dump_attn.py /tmp/d$1.pt; }
compare() { python3 .tl/cmp_attn.py /tmp/d$1.pt /tmp/d$2.pt | tee -a $out/exp.txt; }
invariance_tests() {
  timeout 200 python3 -m pytest -q -p no:cacheprovider -m cuda tests/test_batch_invariance.py -k "attention" 2>&1 \
    | tail -2 | tee -a $out/exp.txt
}
ab() {  # ab NEW BASE RUNS: NEW (the tree, built) checked and timed against BASE, the two alternating RUNS times
  ts "built $1 (tree)"
  dump $1; attention_tests; invariance_tests
  bench $1 1
  use $2; dump $2; bench $2 1
  compare $1 $2
  for run in $(seq 2 $3); do use $1; bench $1 $run; use $2; bench $2 $run; done
  ts done
}
