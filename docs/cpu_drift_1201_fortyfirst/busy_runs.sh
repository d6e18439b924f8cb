#!/usr/bin/env bash
# The fortieth session's always-accepted repro (docs/cpu_flake_1130_fortieth/repro.py) on the 3-layer tiny model,
# RUNS fresh engines beside BUSY busy shell loops (default 2), on whatever build .venv holds; one line a run in
# $OUT/$LABEL.txt.
# A run fails where its steps at k = 0 are as many as those with drafts or more (what the test asserts).
#   LABEL=new RUNS=50 OUT=docs/cpu_drift_1201_fortyfirst bash docs/cpu_drift_1201_fortyfirst/busy_runs.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${LABEL:?}" "${RUNS:?}" "${OUT:?}"
for ((j = 0; j < ${BUSY:-2}; ++j)); do timeout 900 sh -c 'while :; do :; done' & done
.venv/bin/python docs/cpu_flake_1130_fortieth/repro.py "$RUNS" 3 2>/dev/null | grep "steps by k" >> "$OUT/$LABEL.txt"
kill $(jobs -p) 2>/dev/null || true
python3 - "$OUT/$LABEL.txt" <<'PY'
import ast, sys
rows = [ast.literal_eval(l.split("steps by k")[1].split("]")[0].strip() + "]") for l in open(sys.argv[1])]
fails = sum(r[0] >= sum(r[1:]) for r in rows)
print(f"{sys.argv[1]}: {len(rows)} runs, {fails} with as many steps at k = 0 as with drafts or more (what the test fails)")
PY
