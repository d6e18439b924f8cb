"""TPOT ratios of runs.sh's and aa_runs.sh's runs, from the repository root:
  .venv/bin/python docs/cpu_host_1201_fortythird/analyse.py
runs.sh: k = 0's TPOT over adaptive's (the TPOT speedup) of each run's median repeats. aa_runs.sh: the same with the
two k = 0 engines (built with graphs on, then off: on a CPU the same engine), the first built's TPOT over the
second's."""
import glob
import json
import statistics
from pathlib import Path

here = Path(__file__).parent


def report(mode: str, name: str, key: str, first, second) -> None:
    ratios = []
    print(f"{name}:")
    for path in sorted(glob.glob(str(here / f"{mode}_r*.json"))):
        results = {r[key]: r for r in json.load(open(path))["results"]}
        a, b = results[first], results[second]
        ratios.append(a["tpot_ms"] / b["tpot_ms"])
        print(f"  {Path(path).stem}: {a['tpot_ms']:.2f} / {b['tpot_ms']:.2f} ms = {ratios[-1]:.3f}, second's steps by k "
              f"{b['steps_by_k']}, target ms/step {a['target_ms_per_step']:.2f} / {b['target_ms_per_step']:.2f}")
    print(f"  median {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f}, {len(ratios)} runs)")


report("P", "k = 0 / adaptive, one process per method", "policy", "fixed", "adaptive")
report("I", "k = 0 / adaptive, both engines in one process", "policy", "fixed", "adaptive")
report("PAA", "k = 0 / k = 0, one process per engine", "graphs", True, False)
report("IAA", "k = 0 / k = 0, both engines in one process", "graphs", True, False)
