"""The stash-size grid: per batch, each adaptive engine's TPOT speedup against k = 0's and against the best fixed
k's (the fixed k with the lowest TPOT in that run), per run, median and pooled (ratio of TPOTs summed over runs),
with the median over runs of its steps at k >= 1 and of the positions it caught up.
  python3 analyse.py 'grid_r*.json' > table.md"""
import glob
import json
import statistics
import sys

runs = [json.load(open(p))["results"] for p in sorted(glob.glob(sys.argv[1]))]
batches = sorted({r["batch"] for r in runs[0]})
stashes = sorted({r["deferred_fill_positions"] for r in runs[0] if r["policy"] == "adaptive"}, reverse=True)
print(f"{len(runs)} runs")
print("| batch | stash | vs k = 0, per run | median | pooled | vs best fixed k, per run | median | pooled | "
      "steps at k >= 1 (median) | caught up (median) |")
print("|---|---|---|---|---|---|---|---|---|---|")
for b in batches:
    for d in stashes:
        vs0, vsbest, drafting, caught = [], [], [], []
        sums = {}
        for run in runs:
            cells = [r for r in run if r["batch"] == b]
            tpot = {r["k"]: r["tpot_ms"] for r in cells if r["policy"] == "fixed"}
            a = next(r for r in cells if r["policy"] == "adaptive" and r["deferred_fill_positions"] == d)
            fixed = {k: t for k, t in tpot.items() if k != 0}
            vs0.append(tpot[0] / a["tpot_ms"])
            vsbest.append(min(fixed.values()) / a["tpot_ms"])
            drafting.append(sum(a["steps_by_k"][1:]))
            caught.append(a["caught_up_positions"])
            for k, t in list(tpot.items()) + [("a", a["tpot_ms"])]:
                sums[k] = sums.get(k, 0.0) + t
        best = min((k for k in sums if k not in ("a", 0)), key=lambda k: sums[k])
        print(f"| {b} | {d} | {' '.join(f'{x:.3f}' for x in vs0)} | {statistics.median(vs0):.3f} | "
              f"{sums[0] / sums['a']:.3f} | {' '.join(f'{x:.3f}' for x in vsbest)} | {statistics.median(vsbest):.3f} | "
              f"{sums[best] / sums['a']:.3f} (k = {best}) | {statistics.median(drafting):.0f} | "
              f"{statistics.median(caught):.0f} |")
