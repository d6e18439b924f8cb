import os
import sys, statistics as st, collections
HERE = os.path.dirname(os.path.abspath(__file__)); sys.path.insert(0, HERE); sys.path.insert(0, os.path.join(HERE, '../../../tests'))
from parse import parse
from replay import truths, cpp
from models import DriftCost
runs = []
for p in sys.argv[2:]: runs += parse(p)
b = int(sys.argv[1])
for name, make in (('cpp', cpp), ('drift', lambda: DriftCost())):
    m = make(); errs = collections.defaultdict(list)
    for r in runs:
        if r['policy'] != 'adaptive': continue
        t = truths(runs, r['batch'], r['rep']) if r['batch'] == b else None
        nV = 0
        for s in r['warm'] + r['samples']:
            if s[0] == 'D': m.record_draft(*s[1:]); continue
            m.record_verify(*s[1:]); nV += 1
            if t is None or nV < 10: continue
            n, ctx = s[1], s[4]
            for k in t:
                errs[f'V{k}'].append(m.verify_seconds(n, k, n * (1 + k), ctx) / t[k][0] - 1)
                errs[f'D{k}'].append(m.draft_seconds(n, n * t[k][2], k - 1, n * (k - 1)) / t[k][1] - 1)
    print(name, ' '.join(f'{k}:{st.median(v):+.3f}' for k, v in sorted(errs.items())))
# adaptive engine vs fixed engine, same k, per repeat
for r in runs:
    if r['policy'] == 'adaptive' and r['batch'] == b:
        t = truths(runs, b, r['rep'])
        V = collections.defaultdict(list); D = collections.defaultdict(list)
        for s in r['samples']:
            (V[s[2]] if s[0] == 'V' else D[s[3] + 1]).append(s[5] if s[0] == 'V' else (s[5], s[2]))
        print(r['rep'], ' '.join(f'k{k}: V {1e3*st.median(V[k]):.2f}/{1e3*t[k][0]:.2f} D {1e3*st.median(x for x, _ in D[k]):.2f}/{1e3*t[k][1]:.2f} fill {st.median(f for _, f in D[k])}/{t[k][2]}' for k in t if len(V[k]) > 5))
