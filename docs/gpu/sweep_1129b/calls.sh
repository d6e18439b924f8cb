#!/usr/bin/env bash
# The twentieth session's GPU serving runs (2026-11-29), one lent H200, on the code of 9716f92 (graphs recorded at
# start-up, on one capture stream). SHAREGPT: the held-out ShareGPT JSON cut to each record's first two turns.
#   greedy_long_b_c32_80.tgz: SHAREGPT=... SWEEP_ARGS="--concurrencies 32,64,80" \
#                               bash docs/gpu/isolated_1127/calls.sh greedy_long_b
#   c64_80_r5.tgz (this script): k = 0, fixed k = 3 and adaptive at c = 64 and 80, 5 repeats, one fresh server per
#     method and repeat, and each repeat's engine counters in per_repeat.txt, to tell a slow engine instance from a
#     slow cell.
set -uo pipefail
: "${SHAREGPT:?the ShareGPT JSON (held-out split) to sample prompts from}"
STAGES=none bash scripts/gpu_check.sh > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
dir=c64_80_r5
timeout 440 python3 scripts/bench_mtp_sweep.py --isolated --ks 0,3 --adaptive-k-max 3 --concurrencies 64,80 \
  --repeats 5 --min-prompts 144 --prompts-factor 24 --dataset-name sharegpt --dataset-path $SHAREGPT \
  --sharegpt-split held-out --ignore-eos --sharegpt-max-total-len 2000 --disable-tqdm --temperature 0 \
  --out-dir $OUT/$dir -- --devices cuda:0 --dtype bfloat16 > $OUT/$dir.log 2>&1
python3 - $OUT/$dir <<'PY' | tee $OUT/per_repeat.txt
import json, pathlib, sys
print("run                          mean TPOT ms  steps  step ms  target ms  draft ms/step  steps by k")
for path in sorted(pathlib.Path(sys.argv[1], "raw").glob("*.json")):
    d = json.loads(path.read_text())
    e, s = d["engine"] or {}, d["spec_decode"] or {}
    steps = e.get("steps") or 0
    draft = 1000 * (s.get("draft_seconds") or 0) / max(steps, 1)
    print(f"{path.stem:<28} {d['metrics']['mean_tpot_ms']:>12.3f} {steps:>6} {e.get('step_ms', 0):>8.3f} "
          f"{e.get('target_ms', 0):>10.3f} {draft:>14.3f}  {s.get('steps_by_k')}")
PY
[ -f $OUT/$dir/sweep.json ] && python3 scripts/bench_mtp_sweep.py --replot --out-dir $OUT/$dir > /dev/null 2>&1
cat $OUT/$dir/results.md
rm -rf $OUT/$dir/raw; tar czf $OUT/$dir.tgz -C $OUT $dir && rm -rf $OUT/$dir
