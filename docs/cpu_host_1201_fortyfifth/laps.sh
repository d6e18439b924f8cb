#!/usr/bin/env bash
# 2026-12-01, forty-fifth session: the forty-first session's probe laps (docs/cpu_host_1201_fortyfirst/step_laps.diff,
# one_engine.py: 80 greedy requests whose drafts are forced wrong, so every sequence retires; plan_ahead on and a
# fill every step, a GPU's mode; the tiny model on this CPU) for two builds of the extension, k = 0 and adaptive
# engines, three rounds, the builds alternating. From the repository root:
#   bash docs/cpu_host_1201_fortyfifth/laps.sh A.so B.so > OUT.txt
# where each .so is the installed mtpserve/_C built with step_laps.diff applied: laps_plan_ahead.txt has A = df555fb
# and B = b78b160 (plan_ahead skips a step with nothing to draft); laps_plan_ahead_and_fit.txt has A = df555fb and
# B = b78b160 plus an allocation-free OnlineLinearFit solve (its working space kept as members; not kept: the
# `record` lap moved by less than its noise). Each line: round, build, engine, then ms per decode step at k = 0 with
# at least 60 sequences, per lap ("early": steps whose drafting returned at once, counted over all steps). In the
# .txt files A is named main_laps and B new_laps (b78b160) or new2_laps (b78b160 and the fit).
cd "$(dirname "$0")/../.."
so=$(.venv/bin/python -c "import mtpserve._C as c; print(c.__file__)" 2>/dev/null)
for r in 1 2 3; do
  order="$1 $2"; [ $((r % 2)) = 0 ] && order="$2 $1"
  for b in $order; do
    cp "$b" "$so"
    for m in k0 adaptive; do
      line=$(.venv/bin/python docs/cpu_host_1201_fortyfirst/one_engine.py $m 8 2>&1 | grep PROBE | sed 's/PROBE //' | tr '\n' ' ')
      echo "$r $(basename "$b" .so) $m $line"
    done
  done
done
