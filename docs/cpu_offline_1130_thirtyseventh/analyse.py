"""Issue 14's CPU offline cells over several runs of bench_offline.py: per batch, adaptive's TPOT against k = 0's
and against the best fixed k's (the fixed k with the lowest TPOT in that run), per run, their median, and pooled
(the ratio of the TPOTs summed over runs; the best fixed k pooled is the k with the lowest summed TPOT).
  python3 analyse.py 'grid_r*.json' > table.md"""
import glob
import json
import statistics
import sys

runs = [json.load(open(p))["results"] for p in sorted(glob.glob(sys.argv[1]))]
batches = sorted({r["batch"] for r in runs[0]})
print(f"{len(runs)} runs")
print("| batch | adaptive vs k = 0, per run (k0 TPOT / adaptive TPOT) | median | pooled | adaptive vs best fixed k, per run | median | pooled (best k) |")
print("|---|---|---|---|---|---|---|")
for b in batches:
    vs0, vsbest = [], []
    sums = {}
    for run in runs:
        tpot = {("a" if r["policy"] == "adaptive" else r["k"]): r["tpot_ms"] for r in run if r["batch"] == b}
        fixed = {k: t for k, t in tpot.items() if k not in ("a", 0)}
        vs0.append(tpot[0] / tpot["a"])
        vsbest.append(min(fixed.values()) / tpot["a"])
        for k, t in tpot.items():
            sums[k] = sums.get(k, 0.0) + t
    best = min((k for k in sums if k not in ("a", 0)), key=lambda k: sums[k])
    print(f"| {b} | {' '.join(f'{x:.3f}' for x in vs0)} | {statistics.median(vs0):.3f} | {sums[0] / sums['a']:.3f} | "
          f"{' '.join(f'{x:.3f}' for x in vsbest)} | {statistics.median(vsbest):.3f} | {sums[best] / sums['a']:.3f} (k = {best}) |")
