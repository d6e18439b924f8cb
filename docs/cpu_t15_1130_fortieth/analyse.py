"""Adaptive's TPOT speedup against k = 0 per run and batch, with adaptive's steps by k, then the median of the runs and
the pooled ratio (TPOTs summed over the runs): python3 docs/cpu_t15_1130_fortieth/analyse.py > table.txt"""
import json
import statistics
from pathlib import Path

cells = {}
for path in sorted(Path(__file__).parent.glob("t1.5_r*.json")):
    by = {(r["policy"], r["k"], r["batch"]): r for r in json.loads(path.read_text())["results"]}
    line = []
    for batch in (1, 8, 32, 64):
        k0, adaptive = by[("fixed", 0, batch)]["tpot_ms"], by[("adaptive", 3, batch)]
        cells.setdefault(batch, []).append((k0, adaptive["tpot_ms"]))
        line.append(f"b{batch} {k0 / adaptive['tpot_ms']:.3f} {adaptive['steps_by_k']}")
    print(f"{path.stem}: {' | '.join(line)}")
for batch, rows in sorted(cells.items()):
    print(f"batch {batch:2d}: median {statistics.median(k0 / a for k0, a in rows):.3f} "
          f"pooled {sum(k0 for k0, _ in rows) / sum(a for _, a in rows):.3f} n={len(rows)}")
