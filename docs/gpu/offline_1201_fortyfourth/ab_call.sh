#!/usr/bin/env bash
# The forty-fourth session's A/B of the verify line's forgetting on one H200 (kind nvidia-h200, torch 2.11.0+cu130,
# bf16; carry .whl and .ab): version A is the tree (the verify line forgets per sample only), version B main's
# cpp/engine/step_cost_model.{cpp,h} (a step with drafts after a gap ages the whole line), put in .ab/main by
#   mkdir -p .ab/main/cpp/engine && for f in cpp/engine/step_cost_model.cpp cpp/engine/step_cost_model.h; do
#     git show 68af64d:$f > .ab/main/$f; done
# Each version: the policy's tests once, then bench_offline.py at batch 1, 8, 32 and 64 with k = 0, fixed k = 3 and
# adaptive (k_max 3), 3 repeats, greedy and at temperature 1.5; two rounds, A B A B:
#   bash docs/gpu/offline_1201_fortyfourth/ab_call.sh
cd "$(dirname "$0")/../../.."
AB_VARIANT=.ab/main AB_ROUNDS=2 \
  AB_TEST='python3 -m pytest -q -p no:cacheprovider tests/test_speculation_policy.py' \
  AB_CMD='for t in 0 1.5; do
            python3 scripts/bench_offline.py --devices cuda:0 --dtype bfloat16 --ks 0 3 --adaptive-k-max 3 \
              --batch-sizes 1 8 32 64 --repeats 3 --temperature $t --out $RUN_OUT/t$t.json > $RUN_OUT/t$t.log 2>&1
            grep "^| adaptive" $RUN_OUT/t$t.log | cut -d"|" -f2,3,8,16
          done' \
  bash scripts/gpu_ab.sh
