#!/usr/bin/env bash
# The A/B behind results.md: per_request_c1.py (docs/cpu_c1_aging_1129/) four rounds, each first on b0edcd7's
# acceptance_stats.* (old) then on 8d5cefe's (new), rebuilt in place; /tmp/c1ab held the two versions' files.
cd /work/main
for round in 1 2 3 4; do
  for v in old new; do
    if [ $v = old ]; then cp /tmp/c1ab/old.cpp cpp/engine/acceptance_stats.cpp; cp /tmp/c1ab/old.h cpp/engine/acceptance_stats.h;
    else cp /tmp/c1ab/acceptance_stats.cpp cpp/engine/; cp /tmp/c1ab/acceptance_stats.h cpp/engine/; fi
    .venv/bin/pip install -q --no-build-isolation -e ".[test]" > /dev/null 2>&1
    .venv/bin/python docs/cpu_c1_aging_1129/per_request_c1.py fixed,adaptive > /tmp/c1ab/${v}_$round.txt 2>&1
  done
done
cp /tmp/c1ab/acceptance_stats.cpp cpp/engine/; cp /tmp/c1ab/acceptance_stats.h cpp/engine/
.venv/bin/pip install -q --no-build-isolation -e ".[test]" > /dev/null 2>&1
echo DONE
