#!/bin/bash
# The CPU A/B of the thirty-third session: two builds' _C (main, and main with k1_bursts.patch, saved as
# /tmp/so_main.so and /tmp/so_burst.so), swapped in before each run of bench_offline's greedy grid, alternating.
# The temperature-1.5 runs (t15_runs.tgz) were this with `--ks 0 --temperature 1.5`, six of each build; the resume
# margin's (margin_runs.tgz, two of each) were main against main with resume_margin_and_k1_bursts.patch.
#   bash docs/cpu_policy_ab_1130_thirtythird/ab.sh; python3 docs/cost_model_1130_thirtysecond/compare.py .ab/ab
cd "$(dirname "$0")/../.."
so=$(.venv/bin/python -c 'import mtpserve._C as c; print(c.__file__)')
for r in 1 2 3 4 5 6; do
  if [ $((r % 2)) = 1 ]; then order="main burst"; else order="burst main"; fi
  for b in $order; do
    cp /tmp/so_$b.so $so
    .venv/bin/python scripts/bench_offline.py --devices cpu --batch-sizes 1 8 32 64 --ks 0 1 2 3 --adaptive-k-max 3 --max-tokens 128 --repeats 3 --out .ab/ab/${r}_$b.json > .ab/ab/${r}_$b.log 2>&1
    echo "$r $b done $(date +%T)"
  done
done
