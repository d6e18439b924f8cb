"""Adaptive against k = 0 and the best fixed k, per build, from bench_offline.py JSONs named <run>_<build>.json (or
<build>_<run>.json, as the thirty-first session's CPU A/B named them):
per run (tokens/s of each run's median repeat), and pooled (the median over every repeat of every run, of tokens/s
and of the mean TPOT).  python3 compare.py <dir>"""
import collections
import glob
import json
import statistics as st
import sys

per_run = collections.defaultdict(lambda: collections.defaultdict(list))
tps = collections.defaultdict(lambda: collections.defaultdict(lambda: collections.defaultdict(list)))
tpot = collections.defaultdict(lambda: collections.defaultdict(lambda: collections.defaultdict(list)))


def name(path):
    """(run, build) of a JSON's file name."""
    a, b = path.split('/')[-1].removesuffix('.json').split('_')
    return (int(a), b) if a.isdigit() else (int(b), a)


for path in sorted(glob.glob(sys.argv[1] + '/*.json'), key=name):
    build = name(path)[1]
    results = json.load(open(path))['results']
    for b in sorted({r['batch'] for r in results}):
        cells = {('a' if r['policy'] == 'adaptive' else r['k']): r for r in results if r['batch'] == b}
        for m, r in cells.items():
            tps[build][b][m] += r['tokens_per_s_all']
            tpot[build][b][m].append(r['tpot_ms'])
        best = max(cells[k]['tokens_per_s'] for k in (1, 2, 3))
        per_run[build][b].append(cells['a']['tokens_per_s'] / best)
for build in per_run:
    for b in sorted(per_run[build]):
        ratios = per_run[build][b]
        t = {m: st.median(x) for m, x in tps[build][b].items()}
        p = {m: st.median(x) for m, x in tpot[build][b].items()}
        kt, kp = max((1, 2, 3), key=t.get), min((1, 2, 3), key=p.get)
        print(f"{build} batch {b}: {len(ratios)} runs; adaptive / best fixed k, tokens/s per run "
              f"{' '.join(f'{r:.3f}' for r in ratios)} (median {st.median(ratios):.3f}); pooled tokens/s: "
              f"adaptive / k = {kt} {t['a'] / t[kt]:.3f}, / k = 0 {t['a'] / t[0]:.3f}; pooled TPOT speedup: "
              f"adaptive / k = {kp} {p[kp] / p['a']:.3f}, / k = 0 {p[0] / p['a']:.3f}")
