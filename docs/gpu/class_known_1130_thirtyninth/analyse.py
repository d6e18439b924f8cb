"""Adaptive's TPOT speedup against k = 0 per run (A: class known from 16 verifications, B: from 64), batch by batch,
from calls/runs.tgz: python3 analyse.py > ab_t15.txt"""
import io
import json
import statistics
import tarfile
from pathlib import Path

runs = tarfile.open(Path(__file__).parent / "calls" / "runs.tgz")
cells = {}
for member in sorted(runs.getmembers(), key=lambda m: m.name):
    if not member.name.endswith("offline_t15.json"):
        continue
    version = member.name.split("/")[0][0]
    results = json.load(io.TextIOWrapper(runs.extractfile(member)))["results"]
    by = {(r["policy"], r["batch"]): r for r in results}
    for batch in (1, 8, 32, 64):
        a, k0 = by[("adaptive", batch)], by[("fixed", batch)]
        cells.setdefault((version, batch), []).append(
            (k0["tpot_ms"] / a["tpot_ms"], k0["tpot_ms"], a["tpot_ms"], a["draft_ms_per_step"],
             f'{a["fill_skipped_steps"]}/{a["steps"]}'))
for (version, batch), rows in sorted(cells.items()):
    print(f"{version} batch {batch:2d}: per run {' '.join(f'{r[0]:.3f}' for r in rows)}; "
          f"median {statistics.median(r[0] for r in rows):.3f}, pooled {sum(r[1] for r in rows) / sum(r[2] for r in rows):.3f}; "
          f"draft ms/step {' '.join(f'{r[3]:.4f}' for r in rows)}; fill skipped {' '.join(r[4] for r in rows)}")
