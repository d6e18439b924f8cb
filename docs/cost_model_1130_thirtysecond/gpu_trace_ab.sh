#!/usr/bin/env bash
# Offline A/B of two step cost models on one GPU, every step's cost sample traced (MTP_COST_TRACE=1):
#   ORDER="old tuned tuned" bash docs/cost_model_1130_thirtysecond/gpu_trace_ab.sh   (device kind nvidia-h200, carry .whl)
# Prepared beforehand in the working tree (the device copies it): "old" is the tree itself, main (0f3e29d's engine)
# with ../cost_model_1130_thirtyfirst/replay/cost_trace.patch applied; .ab/tuned holds "tuned"'s step_cost_model.*,
# drifting_cost_fit.* and speculation_policy.h (../cost_model_1130_thirtyfirst/drifting_cost_fit_tuned_noise.patch
# applied, then the same two trace lines). Each is built once and its _C saved under /tmp/so, then swapped in before
# each run. Every run is bench_offline.py at batch 1, 8, 32, 64 with k = 0..3 and adaptive, 3 repeats (~17 s).
set -u
export PYTHONUNBUFFERED=1
t0=$(date +%s)
if [ ! -f /tmp/so/old.so ] || [ ! -f /tmp/so/tuned.so ]; then
  STAGES=none bash scripts/gpu_check.sh > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
fi
export PYTHONPATH=/tmp/site
SO=$(python3 -c 'import mtpserve._C as c; print(c.__file__)')
mkdir -p /tmp/so
if [ ! -f /tmp/so/tuned.so ]; then
  cp "$SO" /tmp/so/old.so
  rm -f cpp/engine/step_cost_model.* cpp/engine/online_linear_fit.* cpp/engine/speculation_policy.h
  cp .ab/tuned/* cpp/engine/
  python3 -m pip install --no-build-isolation --no-deps -e . > /tmp/build_tuned.log 2>&1 || { tail -30 /tmp/build_tuned.log; exit 1; }
  cp "$SO" /tmp/so/tuned.so
fi
echo "built at $(( $(date +%s) - t0 )) s"
i=${FIRST:-1}
for v in $ORDER; do
  cp /tmp/so/$v.so "$SO"
  MTP_COST_TRACE=1 CUDA_VISIBLE_DEVICES=0 timeout ${RUN_TIMEOUT:-170} python3 scripts/bench_offline.py --devices cuda:0 \
    --dtype bfloat16 --batch-sizes 1 8 32 64 --ks 0 1 2 3 --adaptive-k-max 3 --max-tokens 128 --repeats 3 \
    --out "/tmp/${i}_$v.json" > "/tmp/${i}_$v.log" 2>&1
  echo "$i $v rc=$? at $(( $(date +%s) - t0 )) s"
  grep -v '^[VD] ' "/tmp/${i}_$v.log" | tail -40 > "/tmp/${i}_$v.txt"
  gzip -c "/tmp/${i}_$v.log" > "/tmp/${i}_$v.log.gz"
  i=$((i + 1))
done
tar czf "$OUT/runs_${FIRST:-1}.tgz" -C /tmp $(cd /tmp && ls [0-9]*_old.* [0-9]*_tuned.* | grep -v "\.log$")
