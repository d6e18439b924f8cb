#!/usr/bin/env bash
# Offline A/B of the step cost model on one GPU: the new DriftingCostFit (86834da) against the old forgetting line
# (7a599c7's step_cost_model.* and online_linear_fit.*, in .ab/old_engine), rebuilt in place between runs.
set -u
STAGES=none bash scripts/gpu_check.sh > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
mkdir -p /tmp/new_engine && cp cpp/engine/step_cost_model.* cpp/engine/drifting_cost_fit.* /tmp/new_engine/
use() {
  rm -f cpp/engine/step_cost_model.* cpp/engine/drifting_cost_fit.* cpp/engine/online_linear_fit.*
  if [ "$1" = old ]; then cp .ab/old_engine/* cpp/engine/; else cp /tmp/new_engine/* cpp/engine/; fi
  local t=$(date +%s)
  python3 -m pip install --no-build-isolation --no-deps -e . > "/tmp/build_$1.log" 2>&1 || { tail -20 "/tmp/build_$1.log"; exit 1; }
  echo "built $1 in $(( $(date +%s) - t )) s"
}
i=0
for v in new old new old; do
  i=$((i + 1)); use $v
  CUDA_VISIBLE_DEVICES=0 timeout 75 python3 scripts/bench_offline.py --devices cuda:0 --dtype bfloat16 \
    --batch-sizes 1 8 32 --ks 0 1 2 3 --adaptive-k-max 3 --max-tokens 128 --repeats 3 \
    --out "$OUT/${i}_$v.json" > "$OUT/${i}_$v.log" 2>&1
  echo "$i $v rc=$? $(date +%T)"
done
tar czf "$OUT/ab.tgz" -C "$OUT" $(cd "$OUT" && ls *_new.* *_old.* 2>/dev/null)
