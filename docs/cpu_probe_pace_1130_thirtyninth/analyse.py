"""Adaptive's TPOT speedup against k = 0 and against the best fixed k (the run's lowest fixed-k TPOT), per run and
batch, with its steps at each k at batch 64; then per build the median of the runs and the pooled ratio (TPOTs summed
over the runs), from the runs' JSON in this folder or the one given: python3 analyse.py [budget1] > table.txt"""
import json
import sys
import statistics
from pathlib import Path

cells = {}
for path in sorted(Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent).glob("greedy_*_r*.json")):
    build = path.stem.split("_")[1]
    by = {(r["policy"], r["k"], r["batch"]): r for r in json.loads(path.read_text())["results"]}
    line = []
    for batch in (1, 8, 32, 64):
        k0 = by[("fixed", 0, batch)]["tpot_ms"]
        adaptive = by[("adaptive", 3, batch)]
        best = min(by[("fixed", k, batch)]["tpot_ms"] for k in (1, 2, 3))
        cells.setdefault((build, batch), []).append((k0, adaptive["tpot_ms"], min(best, k0)))
        line.append(f"b{batch} {k0 / adaptive['tpot_ms']:.3f} / {min(best, k0) / adaptive['tpot_ms']:.3f}")
    b64 = by[("adaptive", 3, 64)]
    print(f"{path.stem}: vs k = 0 / vs best fixed: {', '.join(line)}; batch 64 steps by k {b64['steps_by_k']}, "
          f"caught up {b64['caught_up_positions']}")
print()
for (build, batch), rows in sorted(cells.items()):
    print(f"{build} batch {batch:2d}: vs k = 0 median {statistics.median(k0 / a for k0, a, _ in rows):.3f} "
          f"pooled {sum(r[0] for r in rows) / sum(r[1] for r in rows):.3f}; vs best fixed median "
          f"{statistics.median(b / a for _, a, b in rows):.3f} pooled {sum(r[2] for r in rows) / sum(r[1] for r in rows):.3f}")
