"""Issue 14's two serving criteria from a sweep.json, by medians (the criterion) and round by round.

Round r pairs each method's r-th repeat: the sweep runs every method once per round, in a rotated order, so a
round's methods ran minutes apart while different rounds can be an hour apart. For each concurrency:
  median    adaptive's TPOT speedup over k = 0 / the best fixed k's, from each method's median-TPOT repeat
  rounds    the same ratio within each round (k = 0 of that round as the baseline)
  vs k0     k = 0's TPOT / adaptive's, medians (the criterion: >= 0.98) and per round

  python3 per_round.py SWEEP_DIR/sweep.json
"""
import json
import statistics
import sys


def main(path):
    rows = json.load(open(path))["rows"]
    by = {}
    for r in rows:
        by.setdefault(r["concurrency"], {})[r["method"]] = r
    print("| c | adaptive / best fixed (medians) | per round | median of rounds | rounds >= 0.95 | "
          "k0 / adaptive TPOT (medians) | per round |")
    print("|---|---|---|---|---|---|---|")
    for c in sorted(by):
        m = by[c]
        base = m["baseline"]
        adaptive = next(v for k, v in m.items() if v["policy"] == "adaptive")
        fixed = [v for k, v in m.items() if v["policy"] == "fixed" and v["k"] > 0]
        rounds = len(base["repeats_mean_tpot_ms"])
        vs_k0 = [b / a for b, a in zip(base["repeats_mean_tpot_ms"], adaptive["repeats_mean_tpot_ms"])]
        k0_ratio = base["mean_tpot_ms"] / adaptive["mean_tpot_ms"]
        against_k0 = f"{k0_ratio:.2f} | {' / '.join(f'{x:.2f}' for x in vs_k0)} |"
        if not fixed:  # a sweep of k = 0 and adaptive alone (the temperature-1.5 criterion)
            print(f"| {c} | - | - | - | - | {against_k0}")
            continue
        median_ratio = k0_ratio / max(base["mean_tpot_ms"] / f["mean_tpot_ms"] for f in fixed)
        per_round = [vs_k0[i] / max(base["repeats_mean_tpot_ms"][i] / f["repeats_mean_tpot_ms"][i] for f in fixed)
                     for i in range(rounds)]
        print(f"| {c} | {median_ratio:.2f} | {' / '.join(f'{x:.2f}' for x in per_round)} | "
              f"{statistics.median(per_round):.2f} | {sum(x >= 0.95 for x in per_round)} of {rounds} | {against_k0}")


if __name__ == "__main__":
    main(sys.argv[1])
