"""k = 0's TPOT over adaptive's (each run's median repeat) and the paired tokens/s ratio, per run of runs.sh, from
the repository root: python3 docs/cpu_host_1201_fortyfourth/analyse_runs.py docs/cpu_host_1201_fortyfourth/W_r*.json"""
import json, statistics, sys

tpot, paired = [], []
for path in sys.argv[1:]:
    results = json.load(open(path))["results"]
    k0 = next(r for r in results if r["k"] == 0)
    ad = next(r for r in results if r["policy"] == "adaptive")
    tpot.append(k0["tpot_ms"] / ad["tpot_ms"])
    paired.append(statistics.median(a / b for a, b in zip(ad["tokens_per_s_all"], k0["tokens_per_s_all"])))
    print(f"{path}: TPOT {k0['tpot_ms']:.2f} / {ad['tpot_ms']:.2f} ms = {tpot[-1]:.3f}, tokens/s paired "
          f"{paired[-1]:.3f}, adaptive's steps by k {ad['steps_by_k']}")
print(f"median of {len(tpot)} runs: TPOT {statistics.median(tpot):.3f} (min {min(tpot):.3f}, max {max(tpot):.3f}), "
      f"tokens/s paired {statistics.median(paired):.3f}")
