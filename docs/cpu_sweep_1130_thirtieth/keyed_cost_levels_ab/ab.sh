cd /work/main
use() {
  if [ $1 = old ]; then rm -f cpp/engine/keyed_linear_fit.*; fi
  cp /tmp/exp/$1/cpp/engine/* cpp/engine/
  .venv/bin/pip install -q --no-build-isolation -e ".[test]" > /tmp/exp/build_$1.log 2>&1 || { echo build failed; exit 1; }
}
for run in old1 new1 old2 new2; do
  use ${run%?}
  .venv/bin/python scripts/bench_offline.py --batch-sizes 1 8 32 --ks 0 1 2 3 --adaptive-k-max 3 --max-tokens 128 --repeats 5 --out /tmp/exp/ab_$run.json > /tmp/exp/ab_$run.log 2>&1
  echo "$run done $(date +%T)"
done
use new
