"""Issue 14's greedy serving sweeps with their repeats pooled, cell by cell (the sweeps' sweep.json files, or the
H200 calls' archives that hold them).

For each concurrency: adaptive's TPOT speedup over k = 0 and over the fixed k with the lowest mean TPOT in the pooled
repeats, as a ratio of geometric means with a 95% interval (normal on the log scale, unequal variances); then the
engine's ms a step, and its target, drafting and plan parts, for adaptive and that fixed k (means over the repeats).
Picking the best of three fixed k by their means favours the fixed k a little (the least noisy draw wins).

  python3 docs/gpu/sweep_1202_fiftysixth/pool.py docs/gpu/sweep_1202_fiftysixth/calls/call*/greedy_*.tgz
  python3 docs/gpu/sweep_1202_fiftysixth/pool.py docs/gpu/sweep_1201_fiftieth/calls/call*/greedy_*.tgz \
      docs/gpu/sweep_1202_fiftysixth/calls/call*/greedy_*.tgz
  python3 docs/gpu/sweep_1202_fiftysixth/pool.py docs/cpu_sweep_1202_fiftysixth/greedy_c*/sweep.json \
      docs/cpu_sweep_1201_fortyninth/greedy_c1_80/sweep.json
"""
import math
import statistics as st
import sys

from steal import sweep_rows  # this folder's: a sweep.json, or the sweep.json in a call's archive

ADAPTIVE = "MTP adaptive k_max=3"
PARTS = ("step", "target", "draft", "draft host", "plan")


def speedup(slower, faster):
    """TPOT of `slower` over `faster` (geometric means), with its 95% interval."""
    ls, lf = [math.log(x) for x in slower], [math.log(x) for x in faster]
    d = st.mean(ls) - st.mean(lf)
    se = math.sqrt(st.variance(ls) / len(ls) + st.variance(lf) / len(lf))
    return f"{math.exp(d):.3f} ({math.exp(d - 1.96 * se):.3f}–{math.exp(d + 1.96 * se):.3f})"


def parts(steps):
    return " / ".join(f"{1000 * st.mean(s[i] for s in steps):.0f}" for i in range(len(PARTS)))


def main(paths):
    tpot, steps = {}, {}
    for path in paths:
        for row in sweep_rows(path):
            key = (row["concurrency"], row["method"])
            tpot.setdefault(key, []).extend(row["repeats_mean_tpot_ms"])
            steps.setdefault(key, []).extend(row["repeats_step_ms"])
    print(f"| c | repeats | adaptive vs k = 0 | best fixed k | adaptive vs it | µs a step ({' / '.join(PARTS)}): "
          "adaptive | the fixed k |")
    print("|---:|---:|---|---|---|---|---|")
    for c in sorted({c for c, _ in tpot}):
        fixed = [m for cc, m in tpot if cc == c and m.startswith("MTP k=")]
        best = min(fixed, key=lambda m: st.mean(tpot[c, m]))
        a = tpot[c, ADAPTIVE]
        print(f"| {c} | {len(a)} | {speedup(tpot[c, 'baseline'], a)} | {best} | {speedup(tpot[c, best], a)} "
              f"| {parts(steps[c, ADAPTIVE])} | {parts(steps[c, best])} |")


if __name__ == "__main__":
    main(sys.argv[1:])
