"""The temperature-1.5 runs: per batch, adaptive's and fixed k = 3's TPOT speedup against k = 0 (k = 0's TPOT over
theirs) per run, their median and pooled (TPOTs summed over the runs), and adaptive's steps at k >= 1 and sequences
retired in the median run.
  python3 analyse.py 't15_r*.json' > table.md"""
import glob
import json
import statistics
import sys

runs = [json.load(open(p))["results"] for p in sorted(glob.glob(sys.argv[1]))]
print(f"{len(runs)} runs")
print("| batch | adaptive vs k = 0, per run | median | pooled | fixed k = 3 vs k = 0 (median) | adaptive's steps at "
      "k >= 1, per run | retired, per run |")
print("|---|---|---|---|---|---|---|")
for b in sorted({r["batch"] for r in runs[0]}):
    ratios, k3, drafting, retired, sums = [], [], [], [], [0.0, 0.0]
    for run in runs:
        cells = {(r["policy"], r["k"]): r for r in run if r["batch"] == b}
        k0, a = cells[("fixed", 0)], cells[("adaptive", 3)]
        ratios.append(k0["tpot_ms"] / a["tpot_ms"])
        k3.append(k0["tpot_ms"] / cells[("fixed", 3)]["tpot_ms"])
        drafting.append(sum(a["steps_by_k"][1:]))
        retired.append(a["retired"])
        sums[0] += k0["tpot_ms"]
        sums[1] += a["tpot_ms"]
    print(f"| {b} | {' '.join(f'{x:.3f}' for x in ratios)} | {statistics.median(ratios):.3f} | {sums[0] / sums[1]:.3f} | "
          f"{statistics.median(k3):.3f} | {' '.join(map(str, drafting))} | {' '.join(map(str, retired))} |")
